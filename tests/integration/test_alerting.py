"""OME's P0 alert pack (``config/monitoring/prometheusrule.yaml``) in a real Prometheus.

Each of OME's five alerts is checked with Prometheus's own rule unit tester (``promtool test
rules``, from the same Debian package as the Prometheus the tests run): it fires when its
condition holds for its ``for`` and stays quiet when it does not, on series spelled as the
manager exports them (``pod`` as Kubernetes discovery adds it). Then one live check: a real
Prometheus loads the rules, scrapes a running manager, sees OME's ``ome_omenative_*`` series
after a status write, runs every query of the Grafana dashboard (its Instances-by-phase and
rollout-progress panels show the replica), keeps OMEControllerDown inactive while the
manager leads and fires it once the manager is gone.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.resources import INFERENCE_REPLICAS
from omenative_devcluster.prometheus import PrometheusServer, fetch_prometheus, fetch_promtool

pytest.register_assert_rewrite("manager_fixtures")
from manager_fixtures import REPO, eventually, replica_body  # noqa: E402

pytestmark = [pytest.mark.integration]
pytest_plugins = ["manager_fixtures"]

RULES = REPO / "config" / "monitoring" / "prometheusrule.yaml"
DASHBOARD = REPO / "config" / "grafana" / "omenative-dashboard.json"
POD = 'pod="omenative-manager-7c9d5b8f4-kx2mq"'
ALERTS = ("OMEControllerDown", "OMEWebhookFailing", "OMEServiceUnavailable",
          "OMEMassRolloutFailure", "OMEReconcileStalled")


def rule_groups() -> list[dict[str, Any]]:
    """The PrometheusRule's groups: what a Prometheus rule file holds."""
    groups: list[dict[str, Any]] = yaml.safe_load(RULES.read_text())["spec"]["groups"]
    return groups


def rule(alert: str) -> dict[str, Any]:
    """One alerting rule of the pack."""
    (found,) = [r for g in rule_groups() for r in g["rules"] if r.get("alert") == alert]
    return found


def firing(alert: str, **labels: str) -> dict[str, Any]:
    """The alert promtool must see firing: the rule's labels and annotations, plus
    ``labels`` from the series."""
    r = rule(alert)
    return {"exp_labels": {**r["labels"], **labels}, "exp_annotations": r["annotations"]}


def promtool(tmp_path: Path, tests: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    """``promtool test rules`` of ``tests`` against the pack."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": rule_groups()}))
    spec = tmp_path / "tests.yaml"
    spec.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": "30s",
                                    "tests": tests}))
    return subprocess.run([str(fetch_promtool()), "test", "rules", str(spec)],
                          capture_output=True, text=True, timeout=120, check=False)


def case(series: Mapping[str, str], alert: str, at: str,
         expect: list[dict[str, Any]]) -> dict[str, Any]:
    """One promtool test: ``series`` (selector -> values), the alert expected at ``at``."""
    return {"interval": "1m",
            "input_series": [{"series": s, "values": v} for s, v in series.items()],
            "alert_rule_test": [{"eval_time": at, "alertname": alert, "exp_alerts": expect}]}


HEALTHY = {f"up{{{POD}}}": "1x40", f"omenative_leader{{{POD}}}": "1x40"}

CASES: dict[str, dict[str, Any]] = {
    "controller down: healthy and leading": case(HEALTHY, "OMEControllerDown", "10m", []),
    "controller down: no manager scraped at all": case(
        {'up{job="other"}': "1x40"}, "OMEControllerDown", "10m",
        [firing("OMEControllerDown")]),
    "controller down: scraped but none leads": case(
        {f"up{{{POD}}}": "1x40", f"omenative_leader{{{POD}}}": "0x40"},
        "OMEControllerDown", "10m", [firing("OMEControllerDown")]),
    "controller down: scrape failing": case(
        {f"up{{{POD}}}": "0x40", f"omenative_leader{{{POD}}}": "1x40"},
        "OMEControllerDown", "10m", [firing("OMEControllerDown")]),
    "controller down: not yet for 5m": case(
        {f"up{{{POD}}}": "1x2 0x40", f"omenative_leader{{{POD}}}": "1x40"},
        "OMEControllerDown", "5m", []),
    "webhook: denials are 200s": case(
        {f'omenative_webhook_requests_total{{{POD},webhook="/validate-inferenceservice",'
         f'code="200"}}': "0+10x40"}, "OMEWebhookFailing", "15m", []),
    "webhook: a third answered 500": case(
        {f'omenative_webhook_requests_total{{{POD},webhook="/validate-inferenceservice",'
         f'code="200"}}': "0+10x40",
         f'omenative_webhook_requests_total{{{POD},webhook="/validate-inferenceservice",'
         f'code="500"}}': "0+5x40"}, "OMEWebhookFailing", "15m",
        [firing("OMEWebhookFailing")]),
    "service: a healthy backend": case(
        {'router_pool_healthy_count{namespace="demo",inferenceservice="chat"}': "1x40",
         'router_pool_total_count{namespace="demo",inferenceservice="chat"}': "2x40"},
        "OMEServiceUnavailable", "10m", []),
    "service: backends, none healthy": case(
        {'router_pool_healthy_count{namespace="demo",inferenceservice="chat"}': "0x40",
         'router_pool_total_count{namespace="demo",inferenceservice="chat"}': "2x40"},
        "OMEServiceUnavailable", "10m",
        [firing("OMEServiceUnavailable", namespace="demo", inferenceservice="chat")]),
    "service: scaled to zero": case(
        {'router_pool_healthy_count{namespace="demo",inferenceservice="chat"}': "0x40",
         'router_pool_total_count{namespace="demo",inferenceservice="chat"}': "0x40"},
        "OMEServiceUnavailable", "10m", []),
    "mass rollout failure: three services failing": case(
        {**{f'ome_omenative_rollout_group_transition_total{{{POD},namespace="demo",'
            f'isvc="{n}",group="0",from="Promoting",to="Failed"}}': "0+1x60"
            for n in ("a", "b", "c")},
         f'ome_omenative_rollout_group_transition_total{{{POD},namespace="demo",isvc="d",'
         f'group="0",from="Promoting",to="Stable"}}': "0+1x60"},
        "OMEMassRolloutFailure", "40m", [firing("OMEMassRolloutFailure")]),
    "mass rollout failure: only two services failing": case(
        {**{f'ome_omenative_rollout_group_transition_total{{{POD},namespace="demo",'
            f'isvc="{n}",group="0",from="Promoting",to="Failed"}}': "0+1x60"
            for n in ("a", "b")}}, "OMEMassRolloutFailure", "40m", []),
    "mass rollout failure: most runs succeed": case(
        {**{f'ome_omenative_rollout_group_transition_total{{{POD},namespace="demo",'
            f'isvc="{n}",group="0",from="Promoting",to="Failed"}}': "0+1x60"
            for n in ("a", "b", "c")},
         f'ome_omenative_rollout_group_transition_total{{{POD},namespace="demo",isvc="d",'
         f'group="0",from="Promoting",to="Stable"}}': "0+10x60"},
        "OMEMassRolloutFailure", "40m", []),
    "reconcile stalled: growing queue, nothing reconciled": case(
        {f"omenative_queue_depth{{{POD}}}": "5+1x60",
         f"omenative_reconcile_duration_seconds_count{{{POD},result=\"ok\"}}": "100x60"},
        "OMEReconcileStalled", "40m", [firing("OMEReconcileStalled")]),
    "reconcile stalled: busy but draining": case(
        {f"omenative_queue_depth{{{POD}}}": "5+1x60",
         f"omenative_reconcile_duration_seconds_count{{{POD},result=\"ok\"}}": "0+60x60"},
        "OMEReconcileStalled", "40m", []),
    "reconcile stalled: idle, empty queue": case(
        {f"omenative_queue_depth{{{POD}}}": "0x60",
         f"omenative_reconcile_duration_seconds_count{{{POD},result=\"ok\"}}": "100x60"},
        "OMEReconcileStalled", "40m", []),
}


def test_the_pack_has_omes_five_alerts_in_group_ome_p0() -> None:
    (group,) = rule_groups()
    assert group["name"] == "ome.p0"
    assert tuple(r["alert"] for r in group["rules"]) == ALERTS
    for r in group["rules"]:
        assert r["labels"]["tier"] == "p0" and r["labels"]["severity"] == "critical"
        assert r["annotations"]["runbook_url"] == "#" + r["alert"].lower()


def test_promtool_checks_the_rules(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": rule_groups()}))
    done = subprocess.run([str(fetch_promtool()), "check", "rules", str(rules)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 5 rules found" in done.stdout, done.stdout


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_alert_fires_exactly_when_its_condition_holds(tmp_path: Path, name: str) -> None:
    done = promtool(tmp_path, [CASES[name]])
    assert done.returncode == 0, f"{name}:\n{done.stdout}\n{done.stderr}"


# ---------------------------------------------------------------------------- live


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


def _query(server: PrometheusServer, promql: str) -> list[dict[str, Any]]:
    q = urllib.parse.quote(promql)
    result: list[dict[str, Any]] = _get(f"{server.url}/api/v1/query?query={q}")["data"]["result"]
    return result


def _alert_state(server: PrometheusServer, alert: str) -> str:
    for a in _get(f"{server.url}/api/v1/alerts")["data"]["alerts"]:
        if a["labels"].get("alertname") == alert:
            return str(a["state"])
    return "inactive"


async def _dashboard_answers(server: PrometheusServer, namespace: str) -> None:
    """Every query of the Grafana dashboard is PromQL this Prometheus runs (a bad one is an
    HTTP 400), and the Instances-by-phase and rollout-progress panels show the one replica:
    one Instance (Ready) over the eight phase series, its component 100% updated-ready and
    serving."""
    dash = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    exprs = {p["title"]: [t["expr"] for t in p["targets"]] for p in dash["panels"]}
    for queries in exprs.values():
        for q in queries:
            await asyncio.to_thread(_query, server, q.replace("$__rate_interval", "1m"))
    progress = [q for t, qs in exprs.items() if t.startswith("Rollout progress") for q in qs]
    assert len(progress) == 2
    seen: dict[str, Any] = {}

    async def panels() -> bool:
        phases = await asyncio.to_thread(_query, server, exprs["Instances by phase"][0])
        seen["phases"] = {r["metric"].get("phase"): r["value"][1] for r in phases}
        seen["shares"] = [[(r["metric"], r["value"][1]) for r in await asyncio.to_thread(
            _query, server, q) if r["metric"].get("namespace") == namespace] for q in progress]
        # standalone: isvc="" (Prometheus drops an empty label); Ready, updated and serving
        return (len(phases) == 8 and sum(float(r["value"][1]) for r in phases) == 1
                and seen["phases"].get("Ready") == "1"
                and all(len(s) == 1 and s[0][0] == {"namespace": namespace,
                                                    "component": "engine"}
                        and float(s[0][1]) == 1 for s in seen["shares"]))
    try:
        await eventually(panels, timeout=60, what="the phase and progress panels")
    except BaseException as exc:  # pytest.fail's Failed too: say what the panels showed
        raise AssertionError(f"the panels showed {seen}") from exc


@pytest.mark.asyncio(loop_scope="session")
async def test_a_live_prometheus_scrapes_the_manager_and_fires_controller_down(
    start_manager: Callable[..., Any], kube: KubeClient, namespace: str, tmp_path: Path,
) -> None:
    groups = rule_groups()
    for r in groups[0]["rules"]:
        r["for"] = "0s"  # promtool checks the durations; here only the live wiring counts
    groups[0]["interval"] = "1s"
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": groups}))
    mgr = await start_manager()
    binary = await asyncio.to_thread(fetch_prometheus)
    server = PrometheusServer(f"http://127.0.0.1:{mgr.manager.metrics_port}/metrics",
                              binary=binary, rule_files=(rules,),
                              target_labels={"pod": "omenative-manager-0"})
    server.spawn()
    try:
        await server.ready(60)
        await kube.create(INFERENCE_REPLICAS, replica_body("alerts", replicas=1), namespace)

        async def scraped() -> bool:
            got = await asyncio.to_thread(
                _query, server, 'sum(ome_omenative_ir_status_writes_total{result="committed",'
                'pod="omenative-manager-0"})')
            return bool(got) and float(got[0]["value"][1]) >= 1
        await eventually(scraped, timeout=60, what="OME's status write series in Prometheus")
        leader = await asyncio.to_thread(_query, server, "omenative_leader")
        assert float(leader[0]["value"][1]) == 1
        await _dashboard_answers(server, namespace)

        async def quiet() -> bool:  # it fires until the first scrapes are evaluated
            return await asyncio.to_thread(_alert_state, server,
                                           "OMEControllerDown") == "inactive"
        await eventually(quiet, timeout=60, what="OMEControllerDown inactive while leading")

        await mgr.stop()

        async def fired() -> bool:
            return await asyncio.to_thread(_alert_state, server,
                                           "OMEControllerDown") == "firing"
        await eventually(fired, timeout=60, what="OMEControllerDown to fire")
    finally:
        await asyncio.to_thread(server.stop)
