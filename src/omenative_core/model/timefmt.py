"""Time values as the API writes them: RFC 3339 timestamps (seconds) and Go-style durations.

Both are parsed strictly so a bad value in a manifest or the cluster config is reported with
the value and what was expected, never silently read as zero.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

__all__ = [
    "DurationError",
    "format_duration",
    "format_time",
    "parse_duration",
    "parse_time",
    "to_second",
]

_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_TERM = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")


class DurationError(ValueError):
    """A duration string that is not a Go duration with units (``90s``, ``1h30m``)."""


def parse_duration(value: object) -> timedelta:
    """Parse a Go duration (``30m``, ``1h0m0s``, ``1.5s``); a bare number is an error."""
    if isinstance(value, timedelta):
        return value
    if not isinstance(value, str):
        raise DurationError(
            f"invalid duration {value!r}: expected a string with a unit such as '90s' or '30m'"
        )
    text = value.strip()
    if text in {"0", "0s"}:
        return timedelta(0)
    pos = 0
    total = 0.0
    for match in _TERM.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos == 0 or pos != len(text):
        raise DurationError(
            f"invalid duration {value!r}: expected a number with a unit (ns, us, ms, s, m, h), "
            "such as '90s' or '1h30m'"
        )
    return timedelta(seconds=total)


def format_duration(value: timedelta) -> str:
    """Format like Go's ``time.Duration.String`` for whole seconds and above (``1h0m0s``)."""
    micros = round(value.total_seconds() * 1_000_000)
    if micros == 0:
        return "0s"
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    if micros < 1_000_000:
        if micros % 1000 == 0:
            return f"{sign}{micros // 1000}ms"
        return f"{sign}{micros}us"
    seconds, frac = divmod(micros, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    sec_text = f"{secs}" if frac == 0 else f"{secs}.{frac:06d}".rstrip("0")
    if hours:
        return f"{sign}{hours}h{minutes}m{sec_text}s"
    if minutes:
        return f"{sign}{minutes}m{sec_text}s"
    return f"{sign}{sec_text}s"


def to_second(value: datetime) -> datetime:
    """Truncate to whole seconds in UTC: what a status timestamp can hold."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).replace(microsecond=0)


def parse_time(value: object) -> datetime:
    """Parse an RFC 3339 timestamp (``2026-01-02T03:04:05Z``) into an aware UTC datetime."""
    if isinstance(value, datetime):
        return to_second(value)
    if not isinstance(value, str):
        raise ValueError(f"invalid timestamp {value!r}: expected an RFC 3339 string")
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(f"invalid timestamp {value!r}: expected RFC 3339") from exc
    if parsed.tzinfo is None:
        raise ValueError(f"invalid timestamp {value!r}: RFC 3339 needs a zone (Z or +hh:mm)")
    return parsed.astimezone(UTC)


def format_time(value: datetime) -> str:
    """Format as RFC 3339 with second precision, as the API server stores metav1.Time."""
    return to_second(value).strftime("%Y-%m-%dT%H:%M:%SZ")
