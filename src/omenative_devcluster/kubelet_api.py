"""Calls to the API server as the kubelet stand-in makes them.

Timeouts, ``raw_call`` (kubernetes-asyncio without preloading: JSON and the status), its
``RequestError``, the log line and the timestamps the stand-in writes.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
from collections.abc import Awaitable, Iterable
from typing import Any, cast

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

#: (connect, read) timeouts of ordinary requests, seconds
REQUEST_TIMEOUT = (10.0, 30.0)
#: server-side watch window; the read timeout must be longer
WATCH_SECONDS = 240
WATCH_TIMEOUT = (10.0, WATCH_SECONDS + 30.0)
LEASE_NAMESPACE = "kube-node-lease"
GPU = "nvidia.com/gpu"
#: seconds between checks of the fault file's mtime
FAULT_FILE_POLL = 0.5

Json = dict[str, Any]


def _log(msg: str) -> None:
    print(f"[kubelet {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _now_micro() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _rv(obj: Json) -> int:
    try:
        return int(obj.get("metadata", {}).get("resourceVersion", "0"))
    except ValueError:
        return 0


class RequestError(RuntimeError):
    """An API request returned an unexpected HTTP status."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"HTTP {status}: {str(body)[:300]}")
        self.status = status
        self.body = body


async def raw_call(request: Awaitable[Any], ok: Iterable[int] = (200, 201)) -> tuple[int, Json]:
    """Await a kubernetes-asyncio call made with ``_preload_content=False``; return JSON.

    kubernetes-asyncio 36.1.0 does not raise on a non-2xx status in this mode, so the status
    is returned for the caller to check; a status outside ``ok`` raises ``RequestError``.
    ``ApiException`` (raised on some paths) is turned into ``RequestError`` too.
    """
    try:
        resp = cast(aiohttp.ClientResponse, await request)
    except ApiException as exc:
        raise RequestError(int(exc.status or 0), exc.body) from exc
    try:
        text = await resp.text()
    finally:
        resp.release()
    try:
        body = json.loads(text) if text else {}
    except ValueError:
        body = {"raw": text}
    if resp.status not in set(ok):
        raise RequestError(resp.status, body)
    return resp.status, body if isinstance(body, dict) else {"raw": body}
