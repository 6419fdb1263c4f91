"""GPUs as Kubernetes spells them: the extended resource and its quantities.

Shared by the Instance planner (``steps.capacity``: what a gang needs), the node views
(``views``) and the advisor, so none of them imports another for it.
"""

from __future__ import annotations

__all__ = ["GPU_RESOURCE", "gpu_quantity"]

GPU_RESOURCE = "nvidia.com/gpu"
"""The extended resource the planner and the advisor count."""


def gpu_quantity(value: object) -> int:
    """A GPU quantity (``"8"``, ``8``) as an int; anything else (``"500m"``, junk) is 0."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return 0
