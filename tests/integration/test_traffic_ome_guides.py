"""OME's guides "Serve a multi-node model" and "Serve a prefill-decode model" on real nodes,
served through the Service each guide sends its request to, under steady traffic.

The manifests are those of ``test_isvc_models.py`` (the multi-node runtime and
InferenceService, ome-projects/ome-docs ``guides/omenative/serve-a-multi-node-model.md`` at
7f641a34) and ``test_isvc_prefill_decode.py`` (``llama-pd``, its ClusterBaseModel and PD
runtime at the commits named there), on real kubelets and containerd. Substituted, as
nothing else can exist here:

- every container's program: the runtime's ``python3 -m sglang.launch_server`` /
  ``sglang_router.launch_router`` becomes the test model server (``/model-server``, and
  ``/model-server router``) with the runtime's own flags after it, so the kubelet expands
  ``$(MODEL_PATH)``, ``$(PARALLELISM_SIZE)`` and OME's variables in them as for SGLang, and the
  server logs what it got; its readiness probe (``/ready`` every second, not SGLang's
  60-second ones) and small CPU/memory requests (the nodes share this machine's CPUs; the
  GPU count stays, as ``PARALLELISM_SIZE`` comes from it);
- prefill-decode: no host network, no privileged container (both nodes share this machine's
  network namespace, so two pods cannot both hold port 8080 on it; there is no RDMA device);
  the RDMA annotations stay;
- the model's storage path is a directory the test makes, and the test sets the node label
  OME's model agent sets where the model is Ready (on both nodes).

The router finds its prefill and decode pods through the API as the ServiceAccount
``{isvc}-router`` that omenative makes, with a Role allowing get/list/watch on pods, as OME's
router reconciler does (ome-projects/ome@b1b815e6
``pkg/controller/v1beta1/inferenceservice/components/router.go``); the test grants nothing.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import PODS, Resource
from omenative_controller.service_controller import INFERENCE_SERVICES
from omenative_controller.service_sources import CLUSTER_BASE_MODELS, CLUSTER_SERVING_RUNTIMES
from omenative_devcluster.model_engine import server_container
from omenative_devcluster.traffic import LoadGenerator

pytest.register_assert_rewrite("manager_fixtures", "test_isvc_models")
from manager_fixtures import eventually, warning_events  # noqa: E402
from test_isvc_models import (  # noqa: E402 - the guides' manifests, as transcribed there
    MODEL_LABEL,
    cluster_base_model,
    conditions,
    multi_node_isvc,
    multi_node_runtime,
    node_names,
    ome_env,
)
from test_isvc_prefill_decode import MODEL_LABEL as PD_MODEL_LABEL  # noqa: E402
from test_isvc_prefill_decode import cluster_base_model as pd_base_model  # noqa: E402
from test_isvc_prefill_decode import llama_pd, pd_runtime  # noqa: E402
from test_traffic_serve_a_model import models_ready_on  # noqa: E402
from traffic_checks import answering_service, print_figures, server_log_with  # noqa: E402

pytest_plugins = ["realnode_fixtures", "traffic_fixtures"]
pytestmark = [pytest.mark.integration, pytest.mark.realnodes, pytest.mark.component("coredns"),
              pytest.mark.asyncio(loop_scope="session")]

ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")

RATE, SECONDS = 20.0, 4.0
"""The steady load each guide's Service gets once Ready: short, as CI's budget asks."""


def model_server(runner: JSON, *, probe: bool = True, router: bool = False) -> JSON:
    """The runtime's ``runner`` with the test model server as its program, the runner's flags,
    ports, environment and mounts kept (see the module docstring for what is substituted)."""
    command = runner["command"]
    assert command[:2] == ["python3", "-m"], command  # python3 -m <sglang module> FLAGS
    container = server_container(f"{runner['name']}-guide")
    container["command"] = ["/model-server", *(["router"] if router else []), *command[3:]]
    container["env"] = [*container["env"], *runner.get("env", ())]
    container["ports"] = runner.get("ports") or container["ports"]
    container["volumeMounts"] = runner.get("volumeMounts", [])
    gpus = ((runner.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu")
    if gpus:
        container["resources"] = {
            "requests": {**container["resources"]["requests"], "nvidia.com/gpu": str(gpus)},
            "limits": {"nvidia.com/gpu": str(gpus)}}
    if not probe:  # the guide keeps serving probes off the workers
        del container["readinessProbe"]
    return container


async def ready_isvc(kube: KubeClient, namespace: str, name: str, *kinds: str) -> JSON:
    """Wait until the InferenceService has every condition of ``kinds`` True."""
    async def ready() -> JSON | None:
        isvc = await kube.get(INFERENCE_SERVICES, name, namespace)
        conds = conditions(isvc)
        return isvc if all((conds.get(k) or {}).get("status") == "True" for k in kinds) \
            else None

    return await eventually(ready, timeout=240, what=f"{name}: {', '.join(kinds)}")


async def service_url(kube: KubeClient, namespace: str, name: str, path: str) -> str:
    """``http://ClusterIP:port/path`` of the Service ``name``, once it answers."""
    return f"{await answering_service(kube, namespace, name, pods=1)}{path}"


async def steady_load(kube: KubeClient, namespace: str, url: str, scenario: str,
                      **parse: Any) -> Any:
    """``SECONDS`` of requests at ``RATE`` through ``url``; every one must be answered. A
    failure names each failed request (when, which connection, where kube-proxy sent it)
    and the namespace's Warning Events (a probe that failed takes a pod out of its Service)."""
    gen = LoadGenerator(url, rate=RATE, duration=SECONDS, **parse)
    async with gen:
        await gen.wait()
    report = gen.report()
    print_figures(scenario, report)
    if report.sent < RATE * SECONDS * 0.9 or report.failed:
        started = datetime.fromtimestamp(gen.started_wall, UTC).isoformat(timespec="milliseconds")
        warnings = event_lines(await warning_events(kube, namespace))
        raise AssertionError(f"{report.table(scenario)}\nload started at {started}; "
                             f"Warning Events:\n" + "\n".join(warnings or ["  none"]))
    return report


def event_lines(events: list[JSON]) -> list[str]:
    """Events one line each, oldest first: last time, object, reason, count, message."""
    rows = sorted((e.get("lastTimestamp") or e.get("eventTime") or "",
                   (e.get("involvedObject") or {}).get("name", "?"), e.get("reason", ""),
                   e.get("count") or 1, e.get("message", "")) for e in events)
    return [f"  {t} {name} {reason} x{n}: {msg}" for t, name, reason, n, msg in rows]


async def listening(kubeconfig: Path, namespace: str, pod: str,
                    *events: str) -> tuple[list[JSON], dict[str, str]]:
    """The pod's model-server log once it holds ``events`` (and ``listening``), and the
    flags of its command line (``--flag value``)."""
    log = await server_log_with(kubeconfig, namespace, pod, "listening", *events)
    args = next(e for e in log if e["event"] == "listening")["args"]
    return log, {a: b for a, b in zip(args, [*args[1:], ""], strict=True)
                 if a.startswith("--") and not b.startswith("--")}


async def test_serve_a_multi_node_model_on_real_nodes(
    real_kube: KubeClient, real_namespace: str, real_manager: Any, real_kubeconfig: Path,
    tmp_path: Path,
) -> None:
    kube, ns = real_kube, real_namespace
    weights = tmp_path / "qwen3"
    weights.mkdir()
    (weights / "config.json").write_text("{}\n")
    runtime = multi_node_runtime()
    engine = runtime["spec"]["engineConfig"]
    engine["leader"]["runner"] = model_server(engine["leader"]["runner"])
    engine["worker"]["runner"] = model_server(engine["worker"]["runner"], probe=False)
    async with models_ready_on(kube, await node_names(kube), MODEL_LABEL):
        await kube.create(CLUSTER_BASE_MODELS, cluster_base_model(weights))
        await kube.create(CLUSTER_SERVING_RUNTIMES, runtime)
        await real_manager()
        # Steps 2 and 3: the InferenceService Ready, one Instance of a leader and a worker
        await kube.create(INFERENCE_SERVICES, multi_node_isvc(ns), ns)
        await ready_isvc(kube, ns, "qwen3-multi-node", "Ready")
        pods = {role: await kube.get(PODS, f"qwen3-multi-node-engine-0-{role}-0", ns)
                for role in ("leader", "worker")}
        for rank, pod in enumerate(pods.values()):
            env = ome_env(pod)
            assert (env["MODEL_PATH"], env["PARALLELISM_SIZE"]) == (str(weights), "2")
            assert env["OME_INSTANCE_POD_RANK"] == str(rank)
        # what reached each process: the guide's flags, expanded by the kubelet
        leader_log, leader_flags = await listening(
            real_kubeconfig, ns, pods["leader"]["metadata"]["name"], "worker-joined",
            "first-ready")
        worker_log, worker_flags = await listening(
            real_kubeconfig, ns, pods["worker"]["metadata"]["name"], "joined")
        leader_address = ome_env(pods["worker"])["OME_LEADER_ADDRESS"]
        for rank, flags in enumerate((leader_flags, worker_flags)):
            assert {f: flags[f] for f in ("--model-path", "--tp-size", "--nnodes", "--node-rank",
                                          "--dist-init-addr")} == {
                "--model-path": str(weights), "--tp-size": "2", "--nnodes": "2",
                "--node-rank": str(rank), "--dist-init-addr": f"{leader_address}:5000"}
        # the gang formed: the worker joined its leader (by OME_LEADER_ADDRESS) before the
        # leader first answered its readiness probe
        events = [e["event"] for e in leader_log]
        assert "worker-joined" in events and "first-ready" in events, leader_log
        assert events.index("worker-joined") < events.index("first-ready"), leader_log
        assert any(e["event"] == "joined" for e in worker_log), worker_log

        # Step 4: the engine's Service sends requests only to the leader
        url = await service_url(kube, ns, "qwen3-multi-node-engine", "/v1/chat/completions")
        report = await steady_load(kube, ns, url, "Serve a multi-node model")
        assert {o.pod for o in report.answers} == {"qwen3-multi-node-engine-0-leader-0"}


def _pd_answer(body: bytes) -> tuple[str, str, str]:
    """(revision, instance, "prefill pod>decode pod") of the router's answer."""
    try:
        data = json.loads(body)
        hops = f"{data['prefill']['pod']}>{data['decode']['pod']}"
        modes = (data["prefill"]["mode"], data["decode"]["mode"])
    except (ValueError, KeyError, TypeError):
        return ("?", "?", "?")
    return (str(data.get("revision")), str(data.get("instance")),
            hops if modes == ("prefill", "decode") else f"wrong modes {modes}")


def pd_real_runtime() -> JSON:
    """OME's PD runtime with the model server as engine, decoder and router."""
    runtime = pd_runtime()
    spec = runtime["spec"]
    for key in ("engineConfig", "decoderConfig"):
        del spec[key]["hostNetwork"]
        runner = spec[key]["runner"]
        del runner["securityContext"]
        spec[key]["runner"] = model_server(runner)
    spec["routerConfig"]["runner"] = model_server(spec["routerConfig"]["runner"], router=True)
    return runtime


async def test_serve_a_prefill_decode_model_on_real_nodes(
    real_kube: KubeClient, real_namespace: str, real_manager: Any, tmp_path: Path,
) -> None:
    kube, ns = real_kube, real_namespace
    weights = tmp_path / "meta" / "llama"
    weights.mkdir(parents=True)
    (weights / "config.json").write_text("{}\n")
    async with models_ready_on(kube, await node_names(kube), PD_MODEL_LABEL):
        await kube.create(CLUSTER_BASE_MODELS, pd_base_model(weights))
        await kube.create(CLUSTER_SERVING_RUNTIMES, pd_real_runtime())
        await real_manager()
        # Step 2: the three components Ready
        await kube.create(INFERENCE_SERVICES, llama_pd(ns), ns)
        await ready_isvc(kube, ns, "llama-pd", "Ready", "DecoderReady", "RouterReady")
        page = await kube.list(PODS, ns, label_selector="ome.io/inferenceservice=llama-pd")
        pods = {p["metadata"]["name"]: p for p in page.get("items") or ()}
        engines = {n for n in pods if "-engine-" in n}
        decoders = {n for n in pods if "-decoder-" in n}
        assert (len(engines), len(decoders)) == (2, 1), sorted(pods)
        for name in engines | decoders:
            assert ome_env(pods[name])["MODEL_PATH"] == str(weights)
        routers = [p for n, p in pods.items() if "-router-" in n]
        assert [p["spec"]["serviceAccountName"] for p in routers] == ["llama-pd-router"]
        role = await kube.get(ROLES, "llama-pd-router", ns)
        assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"],
                                  "verbs": ["get", "list", "watch"]}]
        binding = await kube.get(ROLE_BINDINGS, "llama-pd-router", ns)
        assert binding["subjects"][0]["name"] == "llama-pd-router"

        # Step 4: the Service llama-pd sends requests to the router, which runs each
        # request's prefill on an engine pod and its decode on the decoder pod
        url = await service_url(kube, ns, "llama-pd", "/v1/chat/completions")
        report = await steady_load(kube, ns, url, "Serve a prefill-decode model",
                                   parse=_pd_answer)
        hops = {o.pod for o in report.answers}
        assert {h.split(">")[0] for h in hops} == engines, hops  # both prefill Instances
        assert {h.split(">")[1] for h in hops} == decoders, hops
