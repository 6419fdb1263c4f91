"""The GPU caretaker's moves as a picture: ``omenative advise SCENARIO --plot FILE``.

Two panels, the cluster before the moves and after them. Each node is a bar of its GPUs,
stacked by the Instance that holds them (one colour per replica, the Instance named in its
block), free GPUs pale on top; an unsound node (bad GPUs) is hatched in red. Nodes are
grouped by topology domain (the key of the advisor's domains; one group for the whole
cluster when it reports none). Each move is numbered in the order it ran: on the before
panel an arrow from the Instance's block to the node the advisor aimed it at, on the after
panel the number on the node it landed on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from omenative_sim.pictures import figure

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["advise_figure", "domain_order"]

_PALETTE = ("tab:blue", "tab:green", "tab:purple", "tab:cyan", "tab:olive", "tab:pink",
            "tab:brown", "tab:orange")


def domain_order(layout: Sequence[Mapping[str, Any]], key: str | None
                 ) -> list[tuple[str, list[Mapping[str, Any]]]]:
    """Nodes grouped by the value of their ``key`` label (in first-seen order); one group
    ``(cluster)`` when ``key`` is None."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for node in layout:
        value = "(cluster)" if key is None else f"{key}={node['labels'].get(key, '-')}"
        groups.setdefault(value, []).append(node)
    return list(groups.items())


def _domain_key(data: Mapping[str, Any]) -> str | None:
    for advice in (data["before"], data["after"]):
        for dom in advice.get("domains", ()):
            if dom.get("key"):
                return str(dom["key"])
    return None


def _instance(rec: Mapping[str, Any]) -> str:
    inst = rec["instance"]
    return f"{inst['replica']}[{inst['index']}]"


def _colours(data: Mapping[str, Any]) -> dict[str, str]:
    names = sorted({who.rsplit("[", 1)[0] for layout in (data["layoutBefore"],
                                                        data["layoutAfter"])
                    for node in layout for who in node["used"]})
    return {name: _PALETTE[i % len(_PALETTE)] for i, name in enumerate(names)}


def _bars(ax: Axes, layout: Sequence[Mapping[str, Any]], key: str | None,
          colours: Mapping[str, str], panel: str) -> dict[str, tuple[float, dict[str, float]]]:
    """Draw one panel's bars; return per node its x and the middle height of each block."""
    where: dict[str, tuple[float, dict[str, float]]] = {}
    x = 0.0
    ticks: list[float] = []
    names: list[str] = []
    for d, (domain, nodes) in enumerate(domain_order(layout, key)):
        first = x
        for node in nodes:
            bottom = 0.0
            mids: dict[str, float] = {}
            for who, gpus in node["used"].items():
                bar = ax.bar(x, gpus, bottom=bottom, width=0.7, edgecolor="white",
                             color=colours[who.rsplit("[", 1)[0]])
                bar.patches[0].set_gid(f"{panel}-{node['name']}-{who}")
                if gpus >= 2:
                    ax.text(x, bottom + gpus / 2, who, ha="center", va="center", fontsize=7,
                            color="white")
                mids[who] = bottom + gpus / 2
                bottom += gpus
            free = max(node["gpus"] - bottom, 0)
            bar = ax.bar(x, free, bottom=bottom, width=0.7, color="#eeeeee", edgecolor="#bbbbbb",
                         hatch="xx" if node["unhealthy"] else None)
            bar.patches[0].set_gid(f"{panel}-{node['name']}-free")
            if node["unhealthy"]:
                frame = ax.bar(x, node["gpus"], width=0.7, fill=False, edgecolor="tab:red",
                               linewidth=2, hatch="//")
                frame.patches[0].set_gid(f"{panel}-{node['name']}-unsound")
            mids["(free)"] = bottom + free / 2
            where[node["name"]] = (x, mids)
            ticks.append(x)
            names.append(node["name"] + ("\n(unsound)" if node["unhealthy"] else ""))
            x += 1
        label = ax.text((first + x - 1) / 2, -0.2, domain, ha="center", va="top", fontsize=8,
                        transform=ax.get_xaxis_transform())
        label.set_gid(f"{panel}-domain-{d}")
        x += 0.6  # a gap between domains
    ax.set_xticks(ticks, names, fontsize=8)
    return where


def _arrows(ax: Axes, moves: Sequence[Mapping[str, Any]],
            where: Mapping[str, tuple[float, dict[str, float]]]) -> None:
    for n, move in enumerate(moves, start=1):
        rec = move["recommendation"]
        who = _instance(rec)
        src = next((where[f] for f in rec["fromNodes"] if f in where), None)
        dst_name = next(iter(rec["targetNodes"] or move["toNodes"]), None)
        if src is None or dst_name is None or dst_name not in where:
            continue
        sx, smids = src
        dx, dmids = where[dst_name]
        sy = smids.get(who, max(smids.values()))
        ax.annotate("", xy=(dx, dmids["(free)"]), xytext=(sx, sy),
                    arrowprops={"arrowstyle": "-|>", "color": "tab:red", "linewidth": 1.5,
                                "connectionstyle": "arc3,rad=-0.3"}, gid=f"move-{n}-arrow")
        ax.text(sx - 0.42, sy, str(n), ha="center", va="center", fontsize=9, color="white",
                fontweight="bold", gid=f"move-{n}",
                bbox={"boxstyle": "circle", "facecolor": "tab:red", "edgecolor": "none"})


def _landings(ax: Axes, moves: Sequence[Mapping[str, Any]],
              where: Mapping[str, tuple[float, dict[str, float]]]) -> None:
    for n, move in enumerate(moves, start=1):
        for node in move["toNodes"]:
            if node not in where:
                continue
            x, mids = where[node]
            # the replacement may have another index: any block of the moved replica
            replica = f"{move['recommendation']['instance']['replica']}["
            y = next((m for who, m in mids.items() if who.startswith(replica)),
                     mids["(free)"])
            ax.text(x - 0.42, y, str(n), ha="center", va="center", fontsize=9, color="white",
                    fontweight="bold", gid=f"landed-{n}-{node}",
                    bbox={"boxstyle": "circle", "facecolor": "tab:red", "edgecolor": "none"})


def _caption(data: Mapping[str, Any], which: str) -> str:
    pending = data["pendingBefore"] if which == "before" else data["pendingAfter"]
    head = "before the moves" if which == "before" else "after the moves"
    gangs = ", ".join(pending) if pending else "none"
    return f"{head}: pending gangs {gangs}"


def advise_figure(data: Mapping[str, Any], *, title: str = "") -> Figure:
    """The advise run's picture from its ``--json`` object (``layoutBefore``/``After``)."""
    key = _domain_key(data)
    colours = _colours(data)
    fig, axes = figure(2, width=max(6.0, 1.1 * len(data["layoutBefore"]) + 3), row_height=3.4)
    for ax, which in zip(axes, ("before", "after"), strict=True):
        layout = data["layoutBefore" if which == "before" else "layoutAfter"]
        where = _bars(ax, layout, key, colours, which)
        if which == "before":
            _arrows(ax, data["moves"], where)
        else:
            _landings(ax, data["moves"], where)
        ax.set_ylabel("GPUs")
        ax.set_ylim(0, max([n["gpus"] for n in layout] + [1]) * 1.1)
        ax.set_title(_caption(data, which), fontsize=9, loc="left")
        ax.tick_params(axis="x", labelbottom=True)
        ax.grid(axis="x", visible=False)
    fig.suptitle(title or "omenative advise", fontsize=10)
    return fig
