"""Runtime placeholders: ``{{.Name}}`` and friends in the runner container, as OME fills them.

OME renders the runner's container JSON as a Go ``text/template`` over the InferenceService's
``metadata`` (OME@cfa05c69 ``pkg/controller/v1beta1/inferenceservice/utils/merging.go``
``ReplacePlaceholders``, called from ``reconcilers/common/podspec_reconciler.go`` for the
leader's and the worker's container). A catalog runtime writes, for example,
``--served-model-name={{.Name}}``. The subset filled here is what a container can use from
``ObjectMeta``:

* ``{{.Name}}``, ``{{.Namespace}}``;
* ``{{.Labels.<key>}}``, ``{{.Annotations.<key>}}`` (``<key>`` of letters, digits and ``_``)
  and ``{{index .Labels "<key>"}}``, ``{{index .Annotations "<key>"}}`` for any key; a key
  that is not there renders ``<no value>``, as Go's template does.

Spaces inside the braces and Go's trim markers (``{{- .Name -}}``; the whitespace around is
kept here, Go trims it) are allowed. A ``{{`` without its ``}}``, or a field ``ObjectMeta``
does not have, fails OME's template too: ``placeholder_problem`` reports it and the
component is blocked with ``RenderFailed``. Other valid Go template actions (pipelines,
``if``, other ``ObjectMeta`` fields) are not filled here and also block with
``RenderFailed``, naming the placeholder.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["fill_placeholders", "placeholder_problem"]

_ACTION: Final = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_FIELD: Final = re.compile(r"^\.(Name|Namespace)$")
_MAP_DOT: Final = re.compile(r"^\.(Labels|Annotations)\.([A-Za-z_][A-Za-z0-9_]*)$")
_MAP_INDEX: Final = re.compile(r'^index\s+\.(Labels|Annotations)\s+"([^"\\]*)"$')
NO_VALUE: Final = "<no value>"


def _value(body: str, meta: Mapping[str, Any]) -> str | None:
    """What the action ``{{body}}`` renders to, or None when OME's template cannot run it."""
    text = body.strip()
    if text.startswith("- "):  # Go's trim markers ({{- ... -}}); the text around is kept
        text = text[2:].strip()
    if text.endswith(" -"):
        text = text[:-2].strip()
    field = _FIELD.match(text)
    if field:
        return str(meta.get(field.group(1).lower()) or "")
    found = _MAP_DOT.match(text) or _MAP_INDEX.match(text)
    if found:
        table = meta.get(found.group(1).lower())
        value = table.get(found.group(2)) if isinstance(table, Mapping) else None
        return value if isinstance(value, str) else NO_VALUE
    return None


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def placeholder_problem(container: Mapping[str, Any]) -> str | None:
    """Why OME could not fill the placeholders of ``container``, or None."""
    for text in _strings(container):
        if "{{" not in text:
            continue
        for action in _ACTION.finditer(text):
            if _value(action.group(1), {}) is None:
                return (f"runtime placeholder {action.group(0)!r} is not supported "
                        "(use {{.Name}}, {{.Namespace}}, {{.Labels.<key>}} or "
                        "{{.Annotations.<key>}})")
        if "{{" in _ACTION.sub("", text):
            return f"unclosed runtime placeholder in {text[:60]!r}"
    return None


def _fill(value: Any, meta: Mapping[str, Any]) -> Any:
    if isinstance(value, str):
        if "{{" not in value:
            return value
        return _ACTION.sub(lambda m: _value(m.group(1), meta) or m.group(0), value)
    if isinstance(value, Mapping):
        return {k: _fill(v, meta) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, meta) for v in value]
    return value


def fill_placeholders(container: Mapping[str, Any], meta: Mapping[str, Any]) -> dict[str, Any]:
    """``container`` with its placeholders filled from the ISVC ``metadata`` ``meta``
    (check ``placeholder_problem`` first: what it reports is left as written)."""
    filled = _fill(container, meta)
    assert isinstance(filled, dict)
    return filled
