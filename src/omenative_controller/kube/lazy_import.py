"""kubernetes-asyncio, imported lazily: its generated packages load a name on first use.

``import kubernetes_asyncio.client`` runs a package ``__init__`` that imports every API
class and all ~1,500 generated models: about 64 MB of RSS in a process whose caches are the
rest of its memory (``benchmarks/bench_memory.py``). The manager uses a handful of those
names (``Configuration``, ``ApiClient``, the config loaders). :func:`install` registers the
library's packages (``kubernetes_asyncio``, ``.client``, ``.client.api``,
``.client.models``) as modules whose attributes are imported on first access, as each
``__init__`` would have imported them (read from its ``from X import Name`` lines); a name
those lines do not give runs the real ``__init__`` after all. The library and its code stay
the same; only when each part is loaded changes. Nothing happens when the library was
imported already (then it is whole, as before).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["LAZY_PACKAGES", "install"]

LAZY_PACKAGES = (
    "kubernetes_asyncio",
    "kubernetes_asyncio.client",
    "kubernetes_asyncio.client.api",
    "kubernetes_asyncio.client.models",
)
"""The packages whose ``__init__`` is replaced by loading on first access."""

_FROM = re.compile(r"^from ([\w.]+) import (\w+)(?: as (\w+))?\s*$", re.MULTILINE)
_IMPORT_AS = re.compile(r"^import ([\w.]+) as (\w+)\s*$", re.MULTILINE)


def _names(source: str) -> dict[str, tuple[str, str | None]]:
    """name -> (module, attribute; None: the module itself) from an ``__init__``'s imports."""
    names: dict[str, tuple[str, str | None]] = {}
    for module, attr, alias in _FROM.findall(source):
        if module != "__future__":
            names[alias or attr] = (module, attr)
    for module, alias in _IMPORT_AS.findall(source):
        names[alias] = (module, None)
    return names


def _is_submodule(package: str, attr: str) -> bool:
    try:
        return importlib.util.find_spec(f"{package}.{attr}") is not None
    except (ImportError, ValueError):
        return False


def _lazy(name: str) -> ModuleType | None:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None or spec.submodule_search_locations is None:
        return None
    module = importlib.util.module_from_spec(spec)
    origin = spec.origin
    names = _names(Path(origin).read_text(encoding="utf-8"))
    state = {"whole": False}

    def whole() -> None:
        """Run the real ``__init__`` (a name its import lines do not give)."""
        if not state["whole"]:
            state["whole"] = True
            assert spec.loader is not None
            spec.loader.exec_module(module)

    def getattr_(attr: str) -> Any:
        got = names.get(attr)
        if got is None and not attr.startswith("__") and _is_submodule(name, attr):
            got = (f"{name}.{attr}", None)  # ``from package import submodule``
        if got is None:
            if attr.startswith("__") or state["whole"]:
                raise AttributeError(f"module {name!r} has no attribute {attr!r}")
            whole()
            return module.__dict__[attr] if attr in module.__dict__ else getattr_(attr)
        target, member = got
        value: Any = importlib.import_module(target)
        if member is not None:
            value = getattr(value, member)
        setattr(module, attr, value)
        return value

    module.__getattr__ = getattr_  # type: ignore[method-assign]  # PEP 562
    return module


def install() -> None:
    """Register the lazy packages (before the first import of kubernetes-asyncio)."""
    if any(name in sys.modules for name in LAZY_PACKAGES):
        return
    for name in LAZY_PACKAGES:  # parents first: finding a child needs its parent's path
        module = _lazy(name)
        if module is None:
            return
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)
