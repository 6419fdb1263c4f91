"""A Prometheus gauge whose series are rows of a dict, for series kept per InferenceReplica.

A labelled ``prometheus_client.Gauge`` keeps a child object per series (its own metric
object, value and lock): ~700 bytes each, so a series per replica costs ~1.7 MB at 2,500
replicas, and it stays for as long as the replica does (issue 36: the manager's peak with
10,000 watched pods). :class:`GaugeRows` keeps one float per label tuple and builds the
family when scraped; it answers the calls the manager makes of a ``Gauge``
(``labels(...).set(v)``, ``remove(...)``), and a scrape prints the same samples.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

__all__ = ["GaugeRows"]


class _Row:
    """``GaugeRows.labels(...)``: what ``.set`` writes to (made per call, not kept)."""

    __slots__ = ("_key", "_rows")

    def __init__(self, rows: dict[tuple[str, ...], float], key: tuple[str, ...]) -> None:
        self._rows, self._key = rows, key

    def set(self, value: float) -> None:
        """Set the series to ``value``."""
        self._rows[self._key] = float(value)


class GaugeRows:
    """A gauge family ``name`` over ``labelnames``, one float per series, in the order the
    series were first set (as a ``Gauge``'s children)."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str],
                 registry: CollectorRegistry) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._rows: dict[tuple[str, ...], float] = {}
        registry.register(self)

    def labels(self, *values: str) -> _Row:
        """The series of ``values`` (one per label name), to ``set``."""
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name}: {len(self.labelnames)} label values expected")
        return _Row(self._rows, tuple(str(v) for v in values))

    def remove(self, *values: str) -> None:
        """Drop the series of ``values``; ``KeyError`` when there is none (as a Gauge)."""
        del self._rows[tuple(str(v) for v in values)]

    def __len__(self) -> int:
        return len(self._rows)

    def describe(self) -> list[Metric]:
        """The family, empty (the registry checks its name once)."""
        return [GaugeMetricFamily(self.name, self.documentation)]

    def collect(self) -> Iterator[Metric]:
        """The family with every series (a scrape; any thread)."""
        rows = list(self._rows.items())  # one step under the GIL: a pass may add a row
        family = GaugeMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for key, value in rows:
            family.add_metric(key, value)
        yield family
