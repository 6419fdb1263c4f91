"""Benchmarks run in CI at a tiny size, so one that breaks fails CI.

``make bench-memory`` records real objects with the real manager (``memory_record.py``) and
replays them at fleet scale; here it records on the test cluster and replays 8 pods per
shape. ``bench_failover.py`` runs one round of Lease hand-overs on the test cluster,
``bench_indexsets.py`` 200 members. Asserted: each exits 0, the recording holds what it
says (one replica of 2 Instances x leader + worker, their native gang objects) and each
prints its table, one row per case. Never a timing or a memory figure: those are the
benchmarks' to report.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

REPO = Path(__file__).resolve().parents[2]


async def run_script(*argv: str, timeout: float = 300.0,
                     env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run a benchmark script in the session loop (the kubelet stand-in runs there too, so
    a blocking wait would stall the pods it waits for); (exit code, stdout, stderr)."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), **(env or {})}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *argv, cwd=REPO, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        async with asyncio.timeout(timeout):
            out, err = await proc.communicate()
    except TimeoutError:
        proc.kill()
        out, err = await proc.communicate()
        pytest.fail(f"{argv[0]} did not finish in {timeout:.0f}s; stderr:\n"
                    f"{err.decode(errors='replace')[-3000:]}", pytrace=False)
    return proc.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace")


async def test_bench_memory_records_and_prints_its_table_at_a_tiny_size(
    kubeconfig_path: Path, tmp_path: Path
) -> None:
    recorded = tmp_path / "recorded.json"
    code, out, err = await run_script(
        "benchmarks/bench_memory.py", "--pods", "8", "--kubeconfig", str(kubeconfig_path),
        "--record-to", str(recorded))
    assert code == 0, f"bench_memory.py exited {code}:\n{err[-3000:]}\n{out[-2000:]}"

    saved = json.loads(recorded.read_text())
    assert saved["replica"]["status"]["readyReplicas"] == 2
    roles = sorted((p["metadata"]["labels"]["ome.io/instance-index"],
                    p["metadata"]["labels"]["ome.io/runner"]) for p in saved["pods"])
    assert roles == [("0", "leader"), ("0", "worker"), ("1", "leader"), ("1", "worker")]
    assert saved["workloads"] and len(saved["pod_groups"]) == 2

    # the table: one row per (shape, mode), 1 replica of 4 Instances and 2 replicas of 2
    rows = [m.groups() for m in re.finditer(
        r"^(\d.*?pods)\s+(caches|manager)\s+([\d,]+)\s", out, re.MULTILINE)]
    assert "target 150 MB" in out, out
    assert [(label, mode) for label, mode, _ in rows] == [
        ("1 x 4 x 2 pods", "caches"), ("1 x 4 x 2 pods", "manager"),
        ("2 x 4 pods", "caches"), ("2 x 4 pods", "manager")], out
    assert all(int(objects.replace(",", "")) > 8 for _, _, objects in rows), out


async def test_bench_failover_prints_both_takeovers(kubeconfig_path: Path) -> None:
    code, out, err = await run_script(
        "benchmarks/bench_failover.py", "--rounds", "1", "--kubeconfig", str(kubeconfig_path))
    assert code == 0, f"bench_failover.py exited {code}:\n{err[-3000:]}\n{out[-2000:]}"
    cases = re.findall(r"^(hard kill|graceful stop)\s+\d+\.\d\d\s", out, re.MULTILINE)
    assert cases == ["hard kill", "graceful stop"], out


async def test_bench_indexsets_prints_both_shapes() -> None:
    code, out, err = await run_script(
        "benchmarks/bench_indexsets.py", "--members", "200", "--repeat", "1")
    assert code == 0, f"bench_indexsets.py exited {code}:\n{err[-3000:]}"
    assert re.findall(r"^\s+200 (every other index|one range)", out, re.MULTILINE) == [
        "every other index", "one range"], out


#: the in-process benchmarks at a tiny size: (argv, lines their output must hold)
IN_PROCESS = {
    "bench_planner": (("--tiny",), (
        r"^== plan time, one InferenceReplica", r"^\s+40\s+[\d.]+ms", r"^incremental, at rest",
        r"^on the event loop\s", r"^simulated rollout time \d+s")),
    "bench_decode": (("--instances", "200", "--repeat", "1"), (
        r"^on the loop \(ReplicaDecoder.decode\)\s+[\d.]+ms",
        r"^decode_replica \(worker thread\)")),
    "bench_service": (("--tiny",), (
        r"^== InferenceService layer", r"^== rollout layer", r"decide, mid-run\s+[\d,]+")),
    "bench_advisor": (("--tiny",), (r"^\s+20\s+\d+\s+\d+\s+[\d.]+ms", r"^\s+40\s+\d+\s+\d+")),
    "bench_status": (("--tiny",), (
        r"^1\. uniform", r"^2\. representative", r"^3\. worst reachable",
        r"every pod fails at once\s+\d+", r"at the end: 0 Ready, 40 updated")),
    "bench_apply": (("--instances", "50"), (r"^\s+bounded\s", r"^shipped executor:")),
}


@pytest.mark.parametrize("script", sorted(IN_PROCESS))
async def test_in_process_benchmarks_run_at_a_tiny_size(script: str) -> None:
    argv, expected = IN_PROCESS[script]
    code, out, err = await run_script(f"benchmarks/{script}.py", *argv, timeout=120)
    assert code == 0, f"{script}.py exited {code}:\n{err[-3000:]}\n{out[-2000:]}"
    missing = [line for line in expected if not re.search(line, out, re.MULTILINE)]
    assert not missing, f"{script}.py printed no line matching {missing}:\n{out[-3000:]}"


async def test_bench_controller_prints_its_table_at_a_tiny_size(kubeconfig_path: Path) -> None:
    code, out, err = await run_script(
        "benchmarks/bench_controller.py", "--replicas", "2", "--timeout", "90", "--settle",
        "1", env={"KUBECONFIG": str(kubeconfig_path)}, timeout=240)
    assert code == 0, f"bench_controller.py exited {code}:\n{err[-3000:]}\n{out[-2000:]}"
    for line in (r"^API writes per created pod \(Leases excluded\)\s+:\s+[\d.]+",
                 r"actions by kind: .*CreatePod=", r"^\s+omenative\s+bare loop$",
                 r"^\s+created -> scheduled \(kube-scheduler\)\s",
                 r"^manager longest event-loop stall \(1 ms ticks\)\s+:\s+[\d.]+ ms",
                 r"the most CPU the loop thread ran within one gap: [\d.]+ ms",
                 r"start-up \(start -> caches synced, before apply\): longest [\d.]+ ms",
                 r"after Ready \(quiet: the deferred full collection\): longest [\d.]+ ms",
                 r"^nodes that lost Ready\s+\d+\s+\d+",
                 r"node health while bare loop ran: (no node lost Ready|\d+ of \d+ nodes)"):
        assert re.search(line, out, re.MULTILINE), f"no line matching {line!r}:\n{out[-3000:]}"
