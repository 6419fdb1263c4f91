"""The controller benchmark's printout: the side-by-side table and the manager's breakdown
from its own ``/metrics`` (requests, actions, passes, waits), the CPU of every process and
each gang's steps."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from bare_loop import PODS_PER_REPLICA
from gang_timeline import print_breakdown


def total(samples: list[tuple[str, dict[str, str], float]], name: str,
          where: Callable[[dict[str, str]], bool] = lambda _: True) -> float:
    return sum(v for n, labels, v in samples if n == name and where(labels))


def by_labels(samples: list[tuple[str, dict[str, str], float]], name: str,
              keys: tuple[str, ...]) -> Counter[str]:
    out: Counter[str] = Counter()
    for n, labels, v in samples:
        if n == name:
            out[" ".join(labels.get(k, "") for k in keys)] += v
    return out


def side_by_side(r: dict[str, Any]) -> None:
    """Manager, bare loop (and the peer, when run) in columns; ratios to the bare loop."""
    n, ready = r["pods"], r["at_ready"]
    m_req = total(ready, "omenative_api_requests_total")
    m_wr = total(ready, "omenative_api_writes_total", lambda lb: lb.get("resource") != "leases")
    cols: list[tuple[str, float, float, float, float, float]] = [
        ("omenative", r["t_manager"], m_req / n, m_wr / n, r["cpu_s"], r["hwm_mib"]),
        ("bare loop", r["t_bare"], r["bare_requests"] / n, r["bare_requests"] / n,
         r["bare_cpu_s"], r["bench_hwm_mib"]),
    ]
    peer = r.get("peer")
    if peer is not None:
        cols.append((peer["name"], peer["seconds"], peer["requests"] / n, float("nan"),
                     peer["cpu_seconds"], peer["peak_rss_mb"]))
    bare_t = r["t_bare"]
    print(f"{'':28}" + "".join(f"{c[0]:>14}" for c in cols))
    rows = (("apply -> all Ready (s)", 1, "{:14.2f}"), ("ratio to the bare loop", -1, "{:14.2f}"),
            ("API requests per pod", 2, "{:14.2f}"), ("API writes per pod", 3, "{:14.2f}"),
            ("CPU seconds", 4, "{:14.1f}"), ("peak RSS (MiB)", 5, "{:14.1f}"))
    for label, idx, fmt in rows:
        vals = [c[1] / bare_t if idx < 0 else c[idx] for c in cols]
        print(f"{label:28}" + "".join(fmt.format(v) for v in vals))
    lost = [len(r["nodes"].lost.get(phase) or ()) for phase in ("omenative", "bare loop", "LWS")]
    print(f"{'nodes that lost Ready':28}" + "".join(f"{v:14d}" for v in lost[:len(cols)])
          + ("   <- NOT COMPARABLE: a node flapped" if any(lost[:len(cols)]) else ""))
    print(f"  (bare loop CPU/RSS: the benchmark process, watchers included; writes per "
          f"InferenceReplica by omenative: {m_wr / r['replicas']:.1f}, per Instance "
          f"{m_wr / (r['replicas'] * r.get('instances', 1)):.1f}"
          + ("; LWS requests: its own client only, kube-controller-manager creates its pods"
             if peer is not None else "") + ")")
    kinds = by_labels(ready, "omenative_pass_duration_seconds_count", ("kind",))
    sums = by_labels(ready, "omenative_pass_duration_seconds_sum", ("kind",))
    print("  passes by kind (count, mean ms): " + ", ".join(
        f"{k}={v:.0f}/{1000 * sums[k] / v:.0f}" for k, v in kinds.most_common() if v))
    held = total(ready, "omenative_status_writes_held_total")
    print(f"  status writes held back (coalesced): {held:.0f}")


def report(r: dict[str, Any]) -> None:
    n = r["pods"]
    base, ready, settled = r["base"], r["at_ready"], r["settled"]

    def req(s: list[tuple[str, dict[str, str], float]], **lb: str) -> float:
        return total(s, "omenative_api_requests_total",
                     lambda labels: all(labels.get(k) == v for k, v in lb.items()))

    def wr(s: list[tuple[str, dict[str, str], float]], leases: bool = False) -> float:
        return total(s, "omenative_api_writes_total",
                     lambda labels: leases or labels.get("resource") != "leases")

    print()
    print(f"== controller benchmark: {r['replicas']} InferenceReplicas x "
          f"{r.get('instances', 1)} Instance(s) x {PODS_PER_REPLICA} pods = {n} pods ==")
    side_by_side(r)
    print(f"manager, apply -> all InferenceReplicas Ready : {r['t_manager']:8.2f} s "
          f"(apply {r['t_apply']:.2f} s, last pod created {r['t_manager_pods_created']:.2f} s,"
          f" last pod Ready {r['t_manager_pods_ready']:.2f} s)")
    print(f"  per InferenceReplica, apply -> Ready: first {r['ir_first']:.2f} s, "
          f"median {r['ir_p50']:.2f} s, p90 {r['ir_p90']:.2f} s; its last pod Ready -> "
          f"readyReplicas: median {r['lag_p50']:.2f} s, max {r['lag_max']:.2f} s")
    print(f"bare kubernetes-asyncio loop, {n} pods Ready  : {r['t_bare']:8.2f} s "
          f"(creates done {r['t_bare_created']:.2f} s)")
    print(f"ratio manager / bare                          : {r['t_manager'] / r['t_bare']:8.2f}")
    print(f"manager peak RSS (VmHWM)                      : {r['hwm_mib']:8.1f} MiB")
    gap, gap_cpu, over, seconds, loop_cpu = r["stall"]
    print(f"manager longest event-loop stall (1 ms ticks) : {1000 * gap:8.1f} ms "
          f"({1000 * gap_cpu:.1f} ms CPU in it; apply -> all Ready; a gap over 10 ms in "
          f"{over} of {seconds} s)")
    print(f"  the most CPU the loop thread ran within one gap: {1000 * loop_cpu:.1f} ms"
          + "".join(f"\n  held the loop: {line}" for line in r.get("stall_callbacks", ())))
    for key, when in (("startup_stall", "start-up (start -> caches synced, before apply)"),
                      ("after_ready_stall", "after Ready (quiet: the deferred full collection)")):
        if key in r:
            gap, gap_cpu, _, _, loop_cpu = r[key]
            print(f"  {when}: longest {1000 * gap:.1f} ms ({1000 * gap_cpu:.1f} ms CPU in it; "
                  f"the loop thread's most in one gap {1000 * loop_cpu:.1f} ms)")
    print("  load average (1 min) while each ran: " + "; ".join(
        f"{name} {load.line()}" for name, load in r["loads"].items()))
    print(f"manager CPU time (start -> Ready + settle)    : {r['cpu_s']:8.1f} s")
    total_req, total_wr = req(ready), wr(ready)
    print(f"API requests per created pod (start -> Ready) : {total_req / n:8.2f} "
          f"({total_req:.0f} requests)")
    print(f"API writes per created pod (Leases excluded)  : {total_wr / n:8.2f} "
          f"({total_wr:.0f} writes; Lease writes {wr(ready, True) - total_wr:.0f})")
    print(f"  manager write rate apply -> Ready: {total_wr / r['t_manager']:.1f}/s; bare "
          f"loop create rate: {n / r['t_bare_created']:.1f}/s")
    lat_sum = by_labels(ready, "omenative_api_request_duration_seconds_sum", ("verb",))
    lat_cnt = by_labels(ready, "omenative_api_request_duration_seconds_count", ("verb",))
    print("  mean API latency seen by the manager (to the response headers): " + ", ".join(
        f"{v}={1000 * lat_sum[v] / lat_cnt[v]:.0f}ms" for v in sorted(lat_cnt)
        if lat_cnt[v] and v != "watch") + f"; bare loop create: {r['bare_create_ms']:.0f}ms")
    p_sum = total(ready, "omenative_reconcile_duration_seconds_sum")
    p_cnt = total(ready, "omenative_reconcile_duration_seconds_count")
    print(f"  reconcile pass time: mean {1000 * p_sum / max(p_cnt, 1):.0f}ms, "
          f"{p_sum:.1f}s in all over {r['t_manager']:.1f}s x {r['workers']} workers")
    print(f"  requests at startup (before the first apply): {req(base):.0f}; "
          f"after Ready until quiet: {req(settled) - req(ready):.0f} requests, "
          f"{r['trailing_writes']:.0f} writes")
    passes = total(ready, "omenative_reconcile_duration_seconds_count")
    print(f"  reconcile passes: {passes:.0f} ({passes / r['replicas']:.1f} per "
          f"InferenceReplica)")
    rq = by_labels(ready, "omenative_api_requests_total", ("verb", "resource"))
    print("  requests by verb/resource: " + ", ".join(
        f"{k}={v:.0f}" for k, v in rq.most_common() if v))
    codes = by_labels(ready, "omenative_api_requests_total", ("code",))
    print("  requests by code: " + ", ".join(f"{k}={v:.0f}" for k, v in codes.most_common()))
    acts = by_labels(ready, "omenative_actions_total", ("kind",))
    print("  actions by kind: " + ", ".join(f"{k}={v:.0f}" for k, v in acts.most_common()))
    fails = by_labels(ready, "omenative_action_failures_total", ("kind", "reason"))
    if any(fails.values()):
        print("  action failures: " + ", ".join(
            f"{k}={v:.0f}" for k, v in fails.most_common() if v))
    restarts = by_labels(settled, "omenative_watch_restarts_total", ("resource", "reason"))
    if any(restarts.values()):  # e.g. the API server closing a watcher it found too slow
        print("  watch restarts: " + ", ".join(
            f"{k}={v:.0f}" for k, v in restarts.most_common() if v))
    results = by_labels(ready, "omenative_reconcile_duration_seconds_count", ("result",))
    print("  passes by result: " + ", ".join(f"{k}={v:.0f}" for k, v in results.most_common()))
    for metric, key, what in (("omenative_queue_wait_seconds", "lane", "queue wait"),
                              ("omenative_slot_wait_seconds", "urgent", "slot wait (urgent)")):
        w_sum = by_labels(ready, metric + "_sum", (key,))
        w_cnt = by_labels(ready, metric + "_count", (key,))
        print(f"  {what}: " + ", ".join(
            f"{k}: {w_cnt[k]:.0f} x {1000 * w_sum[k] / w_cnt[k]:.0f}ms mean"
            for k in sorted(w_cnt) if w_cnt[k]))
    for name in r["loads"]:  # a node that lost Ready voids that contender's figures
        print(f"  node health while {name} ran: {r['nodes'].line(name)}")
    for name, share in r["cpu_share"].items():
        print(f"  CPU seconds while {name} ran (apply -> all Ready): {share.line()}")
    for name, slow in r["slow_watchers"].items():
        print(f"  watchers kube-apiserver closed as too slow while {name} ran: {slow.line()}")
    print("  the manager's pods' Events (reason: message, count): " + "; ".join(
        f"{k} x{v}" for k, v in r["scheduling_events"].most_common(6)))
    print_breakdown(r["milestones"].items(), r["t0s"])
