"""Pictures of the simulator's answers: a rollout preview, the advisor's moves (``--plot``).

Theory of operation:

1. A picture is drawn from the JSON that ``--json`` prints (``SimResult.to_json()``,
   ``ServiceSimResult.to_json()``, ``AdviseResult.to_json()``), never from live objects, so
   what a picture shows is what a reader of the JSON sees, and a saved JSON file can be
   drawn again later (the traffic pictures of ``omenative_devcluster`` work the same way).
2. matplotlib is an optional extra (``pip install 'omenative[plot]'``), imported here only
   when a picture is asked for: ``omenative simulate`` without ``--plot`` never loads it.
   The backend is Agg (no display); the format follows the file's suffix (``.svg``, ``.png``).
3. Output is deterministic: SVG ids come from a fixed hash salt, text stays text
   (``svg.fonttype = none``, also what tests read), and no date or tool version is written
   into the file's metadata. The same JSON gives the same bytes on the same matplotlib.
4. Every series and mark carries an id (matplotlib's ``gid``, the SVG element's ``id``), so
   a test checks what a picture holds by its ids and texts, not by its pixels.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["FORMATS", "SVG_HASH_SALT", "PlotUnavailable", "check_path", "figure", "save_figure"]

FORMATS = (".svg", ".png")
"""The file suffixes a picture can be written as."""

SVG_HASH_SALT = "omenative"
"""The fixed salt of matplotlib's SVG ids, so that one picture always gets the same ids."""

_STYLE: dict[str, Any] = {
    "svg.hashsalt": SVG_HASH_SALT,
    "svg.fonttype": "none",
    "font.size": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "figure.dpi": 100,
    "savefig.dpi": 100,
}


class PlotUnavailable(RuntimeError):
    """A picture was asked for but cannot be made: matplotlib missing, or a bad file name."""


def _pyplot() -> Any:
    try:
        matplotlib = importlib.import_module("matplotlib")
    except ImportError as exc:
        raise PlotUnavailable(
            "--plot needs matplotlib: pip install 'omenative[plot]'") from exc
    matplotlib.use("Agg")
    matplotlib.rcParams.update(_STYLE)
    return importlib.import_module("matplotlib.pyplot")


def check_path(path: str | Path) -> Path:
    """The picture's path, refused (``PlotUnavailable``) unless it ends in a known suffix."""
    out = Path(path)
    if out.suffix.lower() not in FORMATS:
        raise PlotUnavailable(
            f"--plot {out}: the file name must end in {' or '.join(FORMATS)}")
    return out


def figure(rows: int = 1, *, width: float = 10.0, row_height: float = 3.2,
           height_ratios: list[float] | None = None) -> tuple[Figure, list[Any]]:
    """A new figure of ``rows`` panels sharing the time axis, with the house style set."""
    plt = _pyplot()
    fig, axes = plt.subplots(rows, 1, figsize=(width, row_height * rows), sharex=True,
                             squeeze=False, height_ratios=height_ratios)
    return fig, [ax for (ax,) in axes]


def save_figure(fig: Figure, path: str | Path) -> Path:
    """Write ``fig`` to ``path`` (SVG or PNG by its suffix) without dates or versions, and
    free it. Returns the path written."""
    out = check_path(path)
    plt = _pyplot()
    fmt = out.suffix.lower().lstrip(".")
    metadata: dict[str, str | None] = (
        {"Date": None, "Creator": None} if fmt == "svg" else {"Software": None})
    fig.tight_layout()
    fig.savefig(out, format=fmt, metadata=metadata)
    plt.close(fig)
    return out
