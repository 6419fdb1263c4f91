"""What ``kubectl ome advise`` prints: the advisor's moves, domains and notes, for people.

Pure formatting of an ``omenative_core.advisor.Advice`` (a table, or JSON), and the
migration requests ``--apply`` would write; the command itself is in ``kubectl_ome.py``.
"""

from __future__ import annotations

from typing import Any

from omenative_controller.migration_requests import move_request
from omenative_core.advisor import Advice, Recommendation
from omenative_core.codec import to_json

__all__ = ["advice_json", "format_advice", "move_line", "move_request"]


def _frees(rec: Recommendation) -> str:
    b = rec.benefit
    parts = [f"places {b.pending_gang}"] if b.pending_gang else [f"{rec.group}"]
    if b.free_whole_nodes_after != b.free_whole_nodes_before:
        parts.append(f"whole free nodes {b.free_whole_nodes_before} -> "
                     f"{b.free_whole_nodes_after}")
    if b.largest_placeable_gang_after != b.largest_placeable_gang_before:
        parts.append(f"largest gang {b.largest_placeable_gang_before} -> "
                     f"{b.largest_placeable_gang_after} GPUs")
    return "; ".join(parts)


def move_line(rec: Recommendation) -> str:
    """One move in words: which Instance, from where to where, why."""
    return (f"{rec.instance}: {rec.reason}, {','.join(rec.from_nodes)} -> "
            f"{','.join(rec.target_nodes)} ({rec.gpus} GPUs; {_frees(rec)})")


def format_advice(advice: Advice) -> str:
    """The moves as a table, then the fragmentation of each domain, then the notes."""
    lines: list[str] = []
    if advice.recommendations:
        moves: list[tuple[str, ...]] = [
            ("REASON", "INSTANCE", "FROM", "TO (HINT)", "GPUS", "STEP", "WHAT IT FREES")]
        moves += [(r.reason, str(r.instance), ",".join(r.from_nodes), ",".join(r.target_nodes),
                  str(r.gpus), f"{r.step}/{r.cost.instances_moved}", _frees(r))
                 for r in advice.recommendations]
        widths = [max(len(row[i]) for row in moves) for i in range(len(moves[0]) - 1)]
        for row in moves:
            lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False))
                         + "  " + row[-1])
    else:
        lines.append("No moves recommended.")
    lines.append("")
    rows: list[tuple[str, ...]] = [
        ("DOMAIN", "NODES", "FREE GPUS", "ON WHOLE NODES", "FRAGMENTATION", "LARGEST GANG")]
    for d in advice.domains:
        name = "(cluster)" if d.key is None else f"{d.key}={d.value}"
        rows.append((name, str(d.nodes), str(d.free_gpus), str(d.free_on_whole_nodes),
                     f"{d.fragmentation:.2f}", f"{d.largest_placeable_gang} GPUs"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
              for row in rows]
    if advice.notes:
        lines.append("")
        lines += [f"note: {n}" for n in advice.notes]
    return "\n".join(lines)


def advice_json(advice: Advice) -> dict[str, Any]:
    """The advice as JSON (camelCase, as the rest of omenative's output)."""
    out: dict[str, Any] = to_json(advice)
    return out
