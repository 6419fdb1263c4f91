"""``kubectl ome`` as a user runs it: the real kubectl finds the plugin on PATH and talks to
the test cluster while an in-process manager reconciles."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import INFERENCE_REPLICAS
from omenative_devcluster import build

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import (  # noqa: E402
    TEST_LIFECYCLE,
    eventually,
    get_replica,
    patch_replica,
    replica_body,
)
from test_manager_lifecycle import create_ready  # noqa: E402
from test_service_controller import (  # noqa: E402 - the seed example, as the ISVC tests use it
    INFERENCE_SERVICES,
    SERVING_RUNTIMES,
    chat_body,
    runtime_body,
)

if TYPE_CHECKING:
    from conftest import FaultControl

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
pytest_plugins = ["manager_fixtures"]


class Kubectl:
    """Runs ``kubectl ...`` with a PATH holding the cached kubectl and our plugin."""

    def __init__(self, env: dict[str, str], namespace: str) -> None:
        self.env = env
        self.namespace = namespace

    async def __call__(self, *args: str, stdin: bytes = b"",
                       timeout: float = 60) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            "kubectl", *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=self.env)
        out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
        assert proc.returncode is not None
        return proc.returncode, out.decode(), err.decode()

    async def ome(self, *args: str, stdin: bytes = b"") -> tuple[int, str, str]:
        """``kubectl ome ARGS -n NAMESPACE``."""
        return await self(("ome"), *args, "-n", self.namespace, stdin=stdin)

    async def answer_after(self, args: tuple[str, ...],
                           meanwhile: Callable[[], Awaitable[object]]) -> tuple[int, str]:
        """Run an interactive ``kubectl ome ARGS``; when it asks [y/N], await ``meanwhile``
        (another writer's change), then answer y. Its exit code and stderr."""
        proc = await asyncio.create_subprocess_exec(
            "kubectl", "ome", *args, "-n", self.namespace, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=self.env)
        assert proc.stdout is not None and proc.stdin is not None
        shown = b""
        while b"[y/N]" not in shown:
            chunk = await asyncio.wait_for(proc.stdout.read(200), 30)
            assert chunk, f"exited before asking: {shown!r}"
            shown += chunk
        await meanwhile()
        proc.stdin.write(b"y\n")
        await proc.stdin.drain()
        proc.stdin.close()
        _, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode is not None
        return proc.returncode, err.decode()

    async def ok(self, *args: str) -> str:
        """``kubectl ome ARGS -n NAMESPACE`` that must succeed; its stdout."""
        rc, out, err = await self.ome(*args)
        assert rc == 0, f"kubectl ome {' '.join(args)}: exit {rc}\n{out}\n{err}"
        assert "Traceback" not in err
        return out


@pytest.fixture
def kubectl(tmp_path: Path, kubeconfig_path: Path, namespace: str) -> Kubectl:
    """``kubectl`` with ``kubectl-ome`` on PATH and KUBECONFIG naming the test cluster."""
    real = build.bin_dir() / "kubectl"
    if not os.access(real, os.X_OK):
        pytest.fail(f"no cached kubectl at {real} (run python -m "
                    "omenative_devcluster.build)", pytrace=False)
    plugin = Path(sys.executable).parent / "kubectl-ome"
    if not os.access(plugin, os.X_OK):
        pytest.fail(f"no kubectl-ome next to {sys.executable} (pip install -e .)",
                    pytrace=False)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "kubectl").symlink_to(real)
    (bindir / "kubectl-ome").symlink_to(plugin)
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
           "KUBECONFIG": str(kubeconfig_path), "HOME": str(tmp_path)}
    return Kubectl(env, namespace)


def _written_by_users(ir: JSON) -> tuple[Any, Any, Any]:
    """What a ``kubectl ome`` write would change: the spec (its generation) and the
    annotations. The status is the manager's and may change at any time (a progress-only
    status write is held up to ``--status-coalesce``), so resourceVersion is no witness."""
    meta = ir["metadata"]
    return meta.get("generation"), meta.get("annotations") or {}, ir["spec"]


def _ready_rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()[1:] if line.split()[2:3] == ["Ready"]]


async def test_kubectl_finds_the_plugin(kubectl: Kubectl) -> None:
    _, out, err = await kubectl("plugin", "list")
    assert "kubectl-ome" in out, err
    rc, out, err = await kubectl("ome", "--help")
    assert rc == 0 and "instance" in out and "migration" in out, err


async def test_list_status_pause_resume_and_refusals(
    kube: KubeClient, namespace: str, start_manager: Any, kubectl: Kubectl
) -> None:
    await start_manager()
    await create_ready(kube, namespace, replica_body("ko", replicas=2), 2)

    async def listed() -> str | None:
        out = await kubectl.ok("instance", "list", "ko")
        return out if len(_ready_rows(out)) == 2 else None

    out = await eventually(listed, timeout=30, what="kubectl ome instance list: 2 Ready")
    header = out.splitlines()[0].split()
    assert header == ["COMP", "IDX/INC", "PHASE", "PODS(S/A/T)", "REVS", "AOF", "EVIDENCE"]
    rows = _ready_rows(out)
    assert [r[:4] for r in rows] == [["engine", "0/1", "Ready", "2/2/2"],
                                     ["engine", "1/1", "Ready", "2/2/2"]]
    ir = await get_replica(kube, namespace, "ko")
    short = ir["status"]["updateRevision"].rsplit("-", 1)[1]
    assert all(r[4] == short for r in rows)

    data = json.loads(await kubectl.ok("instance", "list", "ko", "-o", "json"))
    assert [(i["index"], i["phase"]) for i in data["instances"]] == [(0, "Ready"), (1, "Ready")]
    # the component flag picks {isvc}-{component}, but "ko" is no ISVC: a clean error
    rc, _, err = await kubectl.ome("instance", "list", "k", "--component", "decoder")
    assert rc == 1 and err.startswith("error: no InferenceReplica") and err[-1:] == "\n"
    assert err.count("\n") == 1

    await kube.create(INFERENCE_REPLICAS, replica_body("kc-engine", replicas=1, single=True),
                      namespace)
    out = await kubectl.ok("instance", "list", "kc", "--component", "engine")
    assert out.splitlines()[0].startswith("COMP")
    detail = await kubectl.ok("instance", "status", "ko", "1")
    if os.environ.get("KUBECTL_OME_SHOW"):
        print(await kubectl.ok("instance", "list", "ko"), detail,
              await kubectl.ok("rollout", "status", "ko"), sep="\n")
    assert "Phase:         Ready" in detail
    assert "ko-engine-1-leader-0" in detail and "ko-engine-1-worker-0" in detail
    rc, _, err = await kubectl.ome("instance", "status", "ko", "7")
    assert rc == 1 and "no Instance 7" in err
    assert "no retry blocks" in await kubectl.ok("instance", "retry-blocks", "ko")
    status = await kubectl.ok("rollout", "status", "ko")
    assert "Paused:     no" in status and "Ready:      True" in status

    # a write without --yes, answered "n", changes nothing
    before = await get_replica(kube, namespace, "ko")
    rc, out, err = await kubectl.ome("rollout", "pause", "ko", stdin=b"n\n")
    assert rc == 1, (out, err)
    assert "spec.paused: false -> true" in out and "[y/N]" in out
    assert "nothing was changed" in err
    after = await get_replica(kube, namespace, "ko")
    assert _written_by_users(after) == _written_by_users(before)
    assert not after["spec"].get("paused")
    # ... and so does no answer at all (stdin closed)
    rc, _, _ = await kubectl.ome("rollout", "pause", "ko")
    assert rc == 1
    # an interactive "y" writes
    rc, out, err = await kubectl.ome("rollout", "pause", "ko", "--freeze", stdin=b"y\n")
    assert rc == 0, (out, err)
    ir = await get_replica(kube, namespace, "ko")
    assert ir["spec"].get("paused") is True and ir["spec"].get("pauseMode") == "Freeze"
    await kubectl.ok("rollout", "resume", "ko", "--yes")
    ir = await get_replica(kube, namespace, "ko")
    assert not ir["spec"].get("paused") and not ir["spec"].get("pauseMode")

    # the object changes between the read and the confirmation. Elsewhere (the manager's
    # status, someone's annotation): the change shown is still the change, so it is sent
    rc, err = await kubectl.answer_after(("rollout", "pause", "ko"), lambda: patch_replica(
        kube, namespace, "ko", {"metadata": {"annotations": {"example.com/touched": "yes"}}}))
    assert rc == 0, err
    assert "the change is the same: sending it again" in err
    ir = await get_replica(kube, namespace, "ko")
    assert ir["spec"].get("paused") is True and not ir["spec"].get("pauseMode")
    await kubectl.ok("rollout", "resume", "ko", "--yes")
    # ... where the change was going (someone froze it meanwhile): refused, theirs stays
    rc, err = await kubectl.answer_after(("rollout", "pause", "ko"), lambda: patch_replica(
        kube, namespace, "ko", {"spec": {"paused": True, "pauseMode": "Freeze"}}))
    assert rc == 3, err
    assert "changed since it was read" in err and "nothing was written" in err
    assert err.count("\n") == 1
    ir = await get_replica(kube, namespace, "ko")
    assert ir["spec"].get("paused") is True and ir["spec"].get("pauseMode") == "Freeze"
    await kubectl.ok("rollout", "resume", "ko", "--yes")

    # pause --yes sets spec.paused, resume clears it; rollout status shows it
    await kubectl.ok("rollout", "pause", "ko", "--yes")
    ir = await get_replica(kube, namespace, "ko")
    assert ir["spec"].get("paused") is True and not ir["spec"].get("pauseMode")
    data = json.loads(await kubectl.ok("rollout", "status", "ko", "-o", "json"))
    assert data["paused"] is True and data["pauseMode"] == "Recover"
    await kubectl.ok("rollout", "resume", "ko", "--yes")
    ir = await get_replica(kube, namespace, "ko")
    assert not ir["spec"].get("paused")
    assert "not paused" in await kubectl.ok("rollout", "resume", "ko", "--yes")

    # refusals: exit 3, one line, nothing written
    users = _written_by_users(ir)
    rc, _, err = await kubectl.ome("scale", "ko", "0", "--yes")
    assert rc == 3 and "refusing to scale to 0" in err and err.count("\n") == 1
    rc, _, err = await kubectl.ome("migration", "start", "ko", "--instance", "9", "--yes")
    assert rc == 3 and "no Instance 9" in err
    rc, _, err = await kubectl.ome("instance", "release-held", "ko", "--revision",
                                   "0123456789", "--yes")
    assert rc == 3 and "no Held revision" in err
    hints = [a for i in range(9) for a in ("--hint-node", f"n{i}")]
    rc, _, err = await kubectl.ome("migration", "start", "ko", "--instance", "0", *hints,
                                   "--yes")
    assert rc == 2 and "at most 8" in err
    assert _written_by_users(await get_replica(kube, namespace, "ko")) == users

    # scale 3 --yes goes through the scale subresource; the new Instance comes up
    await kubectl.ok("scale", "ko", "3", "--yes")
    assert (await get_replica(kube, namespace, "ko"))["spec"]["replicas"] == 3

    async def three() -> bool:
        return len(_ready_rows(await kubectl.ok("instance", "list", "ko"))) == 3

    await eventually(three, timeout=60, what="3 Ready Instances listed")


async def test_migration_start_completes(
    kube: KubeClient, namespace: str, start_manager: Any, kubectl: Kubectl
) -> None:
    await start_manager()
    await create_ready(kube, namespace, replica_body("km", replicas=1), 1)
    request = "5b0c1f9e-2222-4c1e-9c61-3f1d2b9a7e02"
    out = await kubectl.ok("migration", "start", "km", "--instance", "0", "--reason", "test",
                           "--requested-by", "pytest", "--request-id", request, "--yes")
    key = f"ome.io/migration-request-v1-{request}"
    assert key in out and '"schemaVersion":"v1"' in out
    seen: JSON = {}

    async def recorded() -> bool:
        ir = await get_replica(kube, namespace, "km")
        value = (ir["metadata"].get("annotations") or {}).get(key)
        if value:
            seen.update(json.loads(value))
        return bool(value) or bool((ir.get("status") or {}).get("migrations"))

    await eventually(recorded, timeout=30, interval=0.05, what="the request annotation")
    if seen:  # caught before the manager consumed it
        assert seen["instance"] == 0 and seen["requested_by"] == "pytest"
        # from_node names the one node the Instance sits on, or is left out (never "")
        assert seen.get("from_node", "x") != "" and seen["hint_target_nodes"] == []
        assert seen["requested_at"].endswith("Z")
    # a second request for the same Instance while it migrates: exit 3
    rc, out2, err = await kubectl.ome("migration", "start", "km", "--instance", "0", "--yes")
    assert rc == 3 and err.startswith("error: ") and err.count("\n") == 1, (out2, err)

    async def completed() -> JSON | None:
        data = json.loads(await kubectl.ok("migration", "status", "km", "-o", "json"))
        mine = [m for m in data["migrations"] if m["requestUUID"] == request]
        if mine and mine[0]["phase"] == "Failed":
            raise AssertionError(f"migration failed: {mine[0]}")
        return data if mine and mine[0]["phase"] == "Completed" else None

    data = await eventually(completed, timeout=90, interval=0.5, what="migration Completed")
    mine = next(m for m in data["migrations"] if m["requestUUID"] == request)
    assert mine["sourceInstance"] == 0 and mine["succeeded"] is True
    text = await kubectl.ok("migration", "status", "km")
    if os.environ.get("KUBECTL_OME_SHOW"):
        print(text, await kubectl.ok("instance", "list", "km"), sep="\n")
    assert request in text and "Completed" in text

    async def settled() -> bool:
        rows = _ready_rows(await kubectl.ok("instance", "list", "km"))
        return len(rows) == 1 and rows[0][1] == f"{mine['surgeInstance']}/1"

    await eventually(settled, timeout=60, what="the replacement is the one Ready Instance")


async def test_held_revision_shows_evidence_and_is_released(
    kube: KubeClient, namespace: str, start_manager: Any, kubectl: Kubectl,
    faults: FaultControl,
) -> None:
    bad = f"example.com/{namespace}/llm:broken"
    await faults.set(bad_images=[bad])
    await start_manager(lifecycle={**TEST_LIFECYCLE, "stuckPodGracePeriod": "2s"})
    await kube.create(INFERENCE_REPLICAS,
                      replica_body("kh", replicas=1, single=True, image=bad), namespace)
    evidence: set[str] = set()

    async def held() -> str | None:
        evidence.update(line for line in
                        (await kubectl.ok("instance", "list", "kh")).splitlines()[1:])
        out = await kubectl.ok("instance", "retry-blocks", "kh")
        return out if "HELD" in out else None

    out = await eventually(held, timeout=90, what="kubectl ome retry-blocks: HELD")
    ir = await get_replica(kube, namespace, "kh")
    revision = ir["status"]["updateRevision"]
    line = next(line for line in out.splitlines() if line.startswith("HELD"))
    # the evidence names the pull failure the container showed at the deadline: the kubelet
    # alternates ErrImagePull and ImagePullBackOff, so either may be the one recorded
    pulled = ("ErrImagePull", "ImagePullBackOff")
    assert revision in line and "never (held)" in line and any(r in line for r in pulled)
    assert any(r in e for e in evidence for r in pulled), evidence
    blocks = json.loads(await kubectl.ok("instance", "retry-blocks", "kh", "-o", "json"))
    assert blocks["retryBlocks"][0]["state"] == "Held"

    await faults.clear()
    short = revision.rsplit("-", 1)[1]
    out = await kubectl.ok("instance", "release-held", "kh", "--revision", short, "--yes")
    assert f"releases {revision}" in out

    async def released() -> bool:
        ir = await get_replica(kube, namespace, "kh")
        status = ir.get("status") or {}
        return ("ome.io/release-held-revision" not in (ir["metadata"].get("annotations") or {})
                and status.get("readyReplicas") == 1)

    await eventually(released, timeout=90, what="released and Ready")
    assert "no retry blocks" in await kubectl.ok("instance", "retry-blocks", "kh")


async def test_pause_and_resume_an_inference_service(
    kube: KubeClient, namespace: str, start_manager: Any, service_crds_applied: list[str],
    kubectl: Kubectl,
) -> None:
    """`rollout pause NAME` on an InferenceService pauses every OMENative component through
    ome.io/rollout-paused (OME pauses per service); a projected replica is not paused on its
    own."""
    await start_manager()  # with its InferenceService controller
    await kube.create(SERVING_RUNTIMES, runtime_body(namespace, "example.com/llm:1"), namespace)
    await kube.create(INFERENCE_SERVICES, chat_body(namespace), namespace)

    async def paused_as(want: tuple[Any, Any]) -> bool:
        for name in ("chat-engine", "chat-router"):
            try:
                spec = (await get_replica(kube, namespace, name))["spec"]
            except ApiError:  # not projected yet
                return False
            if (spec.get("paused") or None, spec.get("pauseMode") or None) != want:
                return False
        return True

    await eventually(lambda: paused_as((None, None)), timeout=60, what="chat projected")

    out = await kubectl.ok("rollout", "pause", "chat", "--yes")
    assert "ome.io/rollout-paused]: (unset) -> 'true'" in out and "paused (true)" in out, out
    isvc = await kube.get(INFERENCE_SERVICES, "chat", namespace)
    assert isvc["metadata"]["annotations"]["ome.io/rollout-paused"] == "true"
    await eventually(lambda: paused_as((True, None)), timeout=30,
                     what="every component paused by the ISVC controller")

    # a projected replica is paused through its InferenceService, never on its own
    rc, out, err = await kubectl.ome("rollout", "pause", "chat-engine", "--yes")
    assert rc == 3, (out, err)
    assert "projected from InferenceService chat" in err and \
        "kubectl ome rollout pause chat" in err, err

    out = await kubectl.ok("rollout", "pause", "chat", "--freeze", "--yes")
    assert "'true' -> 'freeze'" in out and "repairs too" in out, out
    await eventually(lambda: paused_as((True, "Freeze")), timeout=30, what="Freeze projected")

    out = await kubectl.ok("rollout", "resume", "chat", "--yes")
    assert "'freeze' -> (unset)" in out and "resumed" in out, out
    isvc = await kube.get(INFERENCE_SERVICES, "chat", namespace)
    assert "ome.io/rollout-paused" not in (isvc["metadata"].get("annotations") or {})
    await eventually(lambda: paused_as((None, None)), timeout=30, what="every component resumed")
    out = await kubectl.ok("rollout", "resume", "chat", "--yes")
    assert "not paused: nothing to do" in out, out


async def test_wait_and_dry_run_on_an_inference_service(
    kube: KubeClient, namespace: str, start_manager: Any, service_crds_applied: list[str],
    kubectl: Kubectl,
) -> None:
    """OME's `wait` predicates end with their exit codes (0 matched, 2 not), `--dry-run
    server` goes through the API server's admission and stores nothing, and `instance list
    ISVC` shows every component."""
    await start_manager()
    await kube.create(SERVING_RUNTIMES, runtime_body(namespace, "example.com/llm:1"), namespace)
    await kube.create(INFERENCE_SERVICES, chat_body(namespace), namespace)

    async def projected() -> JSON | None:
        try:
            return await get_replica(kube, namespace, "chat-engine")
        except ApiError:
            return None

    engine = await eventually(projected, timeout=60, what="chat-engine projected")
    replicas = int(engine["spec"].get("replicas") or 1)

    rc, out, err = await kubectl.ome("wait", "chat", "--for=replicas=current",
                                     "--component=engine", f"--replicas={replicas}",
                                     "--timeout=90s")
    assert rc == 0, (out, err)
    rows = dict(line.split(None, 1) for line in out.splitlines()[1:] if " " in line.strip())
    assert rows["Outcome"].strip() == "Matched" and \
        rows["Reason"].strip() == "ReplicaScaleMatched", out

    rc, out, err = await kubectl.ome("wait", "chat", "--for=replicas=current",
                                     "--component=engine", f"--replicas={replicas + 5}",
                                     "--timeout=2s", "-o", "json")
    assert rc == 2, (out, err)
    report = json.loads(out)
    assert report["kind"] == "WaitReport"
    assert (report["content"]["outcome"], report["content"]["reason"]) == \
        ("TimedOut", "ReplicaScaleNotMatched")

    rc, out, err = await kubectl.ome("wait", "nosuch", "--for=condition=Ready", "--timeout=5s")
    assert rc == 2 and "NotFound" in out, (out, err)

    engine = await get_replica(kube, namespace, "chat-engine")
    held = ("--for=held-revision=unheld", "--component=engine",
            f"--revision=chat-engine-{'0' * 10}", "--ir-name=chat-engine")
    rc, out, err = await kubectl.ome("wait", "chat", *held,
                                     f"--ir-uid={engine['metadata']['uid']}", "--timeout=30s")
    assert rc == 0 and "Unheld" in out, (out, err)  # never held: nothing to wait for
    rc, out, err = await kubectl.ome("wait", "chat", *held, "--ir-uid=not-this-one",
                                     "--timeout=2s")
    assert rc == 2 and "ReplicaReplaced" in out, (out, err)

    out = await kubectl.ok("instance", "list", "chat")
    assert {line.split()[0] for line in out.splitlines()[1:]} >= {"engine", "router"}, out

    before = await kube.get(INFERENCE_SERVICES, "chat", namespace)
    for mode in ("client", "server"):
        out = await kubectl.ok("rollout", "pause", "chat", "--dry-run", mode)
        assert f"dry run ({mode})" in out and "paused (true)" not in out, out
    after = await kube.get(INFERENCE_SERVICES, "chat", namespace)
    assert "ome.io/rollout-paused" not in (after["metadata"].get("annotations") or {})
    assert after["metadata"].get("generation") == before["metadata"].get("generation")
    # a dry run is refused where the write would be (a projected replica pauses via its ISVC)
    rc, out, err = await kubectl.ome("rollout", "pause", "chat-engine", "--dry-run", "server")
    assert rc == 3, (out, err)
