"""Watch caches: one informer per resource, keeping only slim views.

An informer LISTs (paginated), then WATCHes from the list's resourceVersion with bookmarks.
A 410 (at the watch's start or as an ERROR event) re-lists; a stream that breaks (payload
errors, disconnects, read timeouts) resumes after the last event it applied, after a
backoff, and re-lists after several failures in a row; a replayed add or update older than
the delete the cache saw never brings the object back. Objects are turned into slim views by a
``view`` function as they arrive (the raw JSON is dropped), keyed ``namespace/name`` (or
``name`` for cluster-scoped resources), with secondary indexes (``owner``, ``node``, ...).

``on_change(namespace, old, new)`` runs for every add, update and delete whose view
changed: equal views (a node heartbeat, a pod's status timestamp) wake nobody.

Write-through (``upsert_if_newer``, the answer of our own write) never goes back in time
and never resurrects: a deleted key keeps a tombstone (its UID and the resourceVersion of
the delete), and an answer for that UID, or one not newer than the delete, is dropped. The
watch and the list stay the only authority on what exists.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

import aiohttp
import structlog

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import Resource
from omenative_controller.kube.tasks import cancel_and_wait

__all__ = [
    "Backoff",
    "IndexFunc",
    "Informer",
    "InformerObserver",
    "object_key",
    "resource_version_newer",
]

V = TypeVar("V")

IndexFunc = Callable[[str | None, Any], Iterable[str]]
"""(namespace, view) -> the index values of that object."""

log = structlog.get_logger("omenative.informer")


class InformerObserver(Protocol):
    """Receives informer events (metrics)."""

    def watch_restart(self, resource: str, reason: str) -> None:
        """A watch stream ended and is restarted (``reason``: timeout, gone, error...)."""

    def cache_size(self, resource: str, size: int) -> None:
        """The cache now holds ``size`` objects."""


class _NullObserver:
    def watch_restart(self, resource: str, reason: str) -> None:
        return None

    def cache_size(self, resource: str, size: int) -> None:
        return None


class Backoff:
    """Exponential backoff with jitter: ``base * 2**n`` capped at ``cap``."""

    def __init__(self, base: float = 0.2, cap: float = 30.0) -> None:
        self.base = base
        self.cap = cap
        self.failures = 0

    def next(self) -> float:
        """The next delay (seconds) and count one more failure."""
        delay = min(self.cap, self.base * (2.0 ** self.failures))
        self.failures += 1
        return delay * (0.5 + random.random() / 2)

    def reset(self) -> None:
        """After a success."""
        self.failures = 0


def object_key(namespace: str | None, name: str) -> str:
    """``namespace/name``, or ``name`` for a cluster-scoped object."""
    return f"{namespace}/{name}" if namespace else name


def resource_version_newer(new: str, old: str) -> bool:
    """True unless ``new`` is provably older than ``old`` (etcd revisions are integers)."""
    try:
        return int(new) >= int(old)
    except ValueError:
        return True


WATCH_SLICE = 0.002
"""Seconds of watch events an informer applies before it lets the event loop run others.

Lines already buffered are read without suspending: a burst of ~90 pod events (the ~384 KiB
the stream may buffer) is ~9 ms of parsing and indexing in one piece."""

TOMBSTONES = 4096
"""Deleted keys remembered per informer (oldest forgotten first)."""


def _strictly_newer(new: str, old: str) -> bool:
    """True when ``new`` is a later etcd revision than ``old`` (unknown: False)."""
    try:
        return int(new) > int(old)
    except ValueError:
        return False


class _Gone(Exception):
    """The watch's resourceVersion is too old: re-list."""


class Informer(Generic[V]):
    """A list+watch cache of one resource over some namespaces (None: all)."""

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        view: Callable[[JSON], V],
        *,
        namespaces: Sequence[str] | None = None,
        label_selector: str | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
        on_change: Callable[[str | None, V | None, V | None], None] | None = None,
        observer: InformerObserver | None = None,
        page_size: int = 500,
        watch_timeout: tuple[int, int] = (240, 360),
        read_timeout: float = 120.0,
        relist_after_failures: int = 5,
        list_gate: asyncio.Semaphore | None = None,
    ) -> None:
        self.client = client
        self.resource = resource
        self.view = view
        self.label_selector = label_selector
        self.scopes: tuple[str | None, ...] = (
            tuple(namespaces) if (namespaces and resource.namespaced) else (None,)
        )
        self.indexers = dict(indexers or {})
        self.on_change = on_change
        self.observer: InformerObserver = observer or _NullObserver()
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.read_timeout = read_timeout
        self.relist_after_failures = relist_after_failures
        self.list_gate = list_gate  # shared: informers LIST one at a time
        self._store: dict[str, V] = {}
        self._ns_of: dict[str, str | None] = {}
        self._rv_of: dict[str, str] = {}
        self._uid_of: dict[str, str] = {}
        self._tombstones: OrderedDict[str, tuple[str, str]] = OrderedDict()
        #: per scope, the resourceVersion of the last watch event applied: a broken stream
        #: resumes there, not where it started (a replay could show deleted objects again)
        self._applied_rv: dict[str | None, str] = {}
        self._indices: dict[str, dict[str, set[str]]] = {n: {} for n in self.indexers}
        self._scope_synced: dict[str | None, bool] = dict.fromkeys(self.scopes, False)
        self.synced = asyncio.Event()
        #: LIST failures in a row (reset by a LIST that succeeds) and the last one's error:
        #: an optional API whose objects cannot be read (``ApiPresence.failing``)
        self.list_failures = 0
        self.list_error = ""
        self.name = resource.plural

    # ------------------------------------------------------------------ reading

    def __len__(self) -> int:
        return len(self._store)

    def get(self, key: str) -> V | None:
        """The view stored under ``namespace/name`` (or ``name``)."""
        return self._store.get(key)

    def items(self) -> Iterator[tuple[str, V]]:
        """Every (key, view)."""
        return iter(list(self._store.items()))

    def key_list(self) -> list[str]:
        """Every key."""
        return list(self._store)

    def store(self) -> Mapping[str, V]:
        """The live store (read it without awaiting in between)."""
        return self._store

    def namespace_of(self, key: str) -> str | None:
        """The namespace of a stored object."""
        return self._ns_of.get(key)

    def by_index(self, index: str, value: str) -> list[V]:
        """Views whose ``index`` function gave ``value``."""
        keys = self._indices[index].get(value, ())
        return [self._store[k] for k in sorted(keys) if k in self._store]

    def index_keys(self, index: str, value: str) -> list[str]:
        """Keys whose ``index`` function gave ``value``."""
        return sorted(self._indices[index].get(value, ()))

    # ------------------------------------------------------------------ writing

    def _put(self, key: str, namespace: str | None, view: V, rv: str, uid: str = "") -> None:
        old = self._store.get(key)
        self._store[key] = view
        self._ns_of[key] = namespace
        self._rv_of[key] = rv
        self._uid_of[key] = uid
        self._reindex(key, namespace, old, view)
        if old != view and self.on_change is not None:
            self.on_change(namespace, old, view)

    def _remove(self, key: str, rv: str = "", *, bury: bool = True) -> None:
        old = self._store.pop(key, None)
        namespace = self._ns_of.pop(key, None)
        last_rv = self._rv_of.pop(key, None)
        uid = self._uid_of.pop(key, None)
        if old is not None and bury:
            self._bury(key, uid or "", rv or last_rv or "")
        self._reindex(key, namespace, old, None)
        if old is not None and self.on_change is not None:
            self.on_change(namespace, old, None)

    def _bury(self, key: str, uid: str, rv: str) -> None:
        """Remember that ``key`` (``uid``) was deleted at ``rv``."""
        self._tombstones.pop(key, None)
        self._tombstones[key] = (uid, rv)
        while len(self._tombstones) > TOMBSTONES:
            self._tombstones.popitem(last=False)

    def deleted(self, key: str) -> bool:
        """True while ``key`` was last seen deleted (by the watch or a re-list)."""
        return key in self._tombstones and key not in self._store

    def _reindex(self, key: str, namespace: str | None, old: V | None, new: V | None
                 ) -> None:
        """Move ``key`` from the index buckets of its ``old`` view to those of its ``new``.
        The indexers are pure functions of the namespace and the view, so the old view's
        values are computed again rather than kept per object (a dict and its tuples, ~445 B
        a pod at 10,000 pods)."""
        for name, func in self.indexers.items():
            before = {v for v in func(namespace, old) if v} if old is not None else set()
            after = {v for v in func(namespace, new) if v} if new is not None else set()
            if before == after:
                continue
            buckets = self._indices[name]
            for value in before - after:
                bucket = buckets.get(value)
                if bucket is not None:
                    bucket.discard(key)
                    if not bucket:
                        del buckets[value]
            for value in after - before:
                buckets.setdefault(value, set()).add(key)

    def _ingest(self, obj: JSON) -> tuple[str, str | None, V, str, str] | None:
        meta = obj.get("metadata") or {}
        name = meta.get("name")
        if not isinstance(name, str):
            return None
        namespace = meta.get("namespace") if self.resource.namespaced else None
        rv = str(meta.get("resourceVersion") or "")
        try:
            view = self.view(obj)
        except Exception as exc:  # a bad object must not stop the cache
            log.warning("informer.bad_object", resource=self.name, name=name,
                        namespace=namespace, error=str(exc))
            return None
        return object_key(namespace, name), namespace, view, rv, str(meta.get("uid") or "")

    def upsert_if_newer(self, obj: JSON) -> None:
        """Write-through of an object we just wrote, unless the cache already has newer or
        the watch already deleted it (same UID, or not newer than the delete)."""
        got = self._ingest(obj)
        if got is None:
            return
        key, namespace, view, rv, uid = got
        old_rv = self._rv_of.get(key)
        if old_rv is not None and not resource_version_newer(rv, old_rv):
            return
        if self._resurrects(key, rv, uid):
            log.debug("informer.resurrection_refused", resource=self.name, key=key, rv=rv)
            return
        self._put(key, namespace, view, rv, uid)

    def expect(self, obj: JSON) -> V | None:
        """Put an object we are about to create, unless its key is cached: the view put
        (hand it to :meth:`unexpect`), or None. It carries no resourceVersion, so the
        create's answer or the watch event replaces it (create_pipeline.py)."""
        got = self._ingest(obj)
        if got is None or got[0] in self._store:
            return None
        key, namespace, view, _, uid = got
        self._put(key, namespace, view, "", uid)
        return view

    def unexpect(self, obj: JSON, view: object) -> None:
        """Take out an object put by :meth:`expect` whose create did not happen, if the
        cache still holds that very view (a watch event or an answer always wins); no
        tombstone is left: nothing was deleted."""
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") if self.resource.namespaced else None
        key = object_key(namespace, str(meta.get("name", "")))
        if self._store.get(key) is view:
            self._remove(key, bury=False)

    def clear(self) -> None:
        """Drop everything (the resource went away); deletes are reported."""
        for key in list(self._store):
            self._remove(key)
        self._tombstones.clear()
        self.synced.clear()
        for scope in self._scope_synced:
            self._scope_synced[scope] = False

    # ------------------------------------------------------------------ list + watch

    async def _list(self, scope: str | None) -> str:
        """LIST every page of ``scope``, replace that scope's objects; return the list RV."""
        while True:
            seen: dict[str, tuple[str | None, V, str, str]] = {}
            token: str | None = None
            rv = ""
            try:
                while True:
                    page = await self.client.list(
                        self.resource, scope, label_selector=self.label_selector,
                        limit=self.page_size, continue_token=token,
                    )
                    for obj in page.get("items") or ():
                        got = self._ingest(obj)
                        if got is not None:
                            seen[got[0]] = got[1:]
                    meta = page.get("metadata") or {}
                    rv = str(meta.get("resourceVersion") or rv)
                    token = meta.get("continue") or None
                    if not token:
                        break
            except ApiError as exc:
                if exc.gone and token:  # the continue token expired: start over
                    continue
                raise
            break
        # A write answered while the LIST was in flight is newer than the list's snapshot:
        # keep it rather than go back in time (a pass would see a gate we set as unset, or a
        # pod we created as missing); the watch from the list's RV brings the same state.
        for key in [k for k, ns in self._ns_of.items() if scope is None or ns == scope]:
            if key not in seen and not self._newer_in_cache(key, rv):
                self._remove(key, rv)
        for key, (namespace, view, obj_rv, uid) in seen.items():
            if self._newer_in_cache(key, obj_rv):
                continue
            self._tombstones.pop(key, None)
            self._put(key, namespace, view, obj_rv, uid)
        self.observer.cache_size(self.name, len(self._store))
        self._scope_synced[scope] = True
        if all(self._scope_synced.values()):
            self.synced.set()
        return rv

    async def _gated_list(self, scope: str | None) -> str:
        """``_list`` while holding the shared gate: each LIST's pages are parsed and
        dropped before another informer's arrive, so they do not interleave in the heap."""
        if self.list_gate is None:
            return await self._list(scope)
        async with self.list_gate:
            return await self._list(scope)

    def _apply(self, kind: str, obj: JSON) -> None:
        got = self._ingest(obj)
        if got is None:
            return
        key, namespace, view, rv, uid = got
        if kind == "DELETED":
            if key not in self._store:  # deleted before we saw it: still no resurrection
                self._bury(key, uid, rv)
            self._remove(key, rv)
        elif self._resurrects(key, rv, uid):  # history from before the delete, replayed
            log.debug("informer.replay_refused", resource=self.name, key=key, rv=rv)
        elif not self._newer_in_cache(key, rv):  # never older than our own write-through
            self._tombstones.pop(key, None)
            self._put(key, namespace, view, rv, uid)
        self.observer.cache_size(self.name, len(self._store))

    def _resurrects(self, key: str, rv: str, uid: str) -> bool:
        """True when putting (``uid``, ``rv``) under ``key`` would bring back what the cache
        saw deleted: the same UID, or a revision not after the delete. Our own write's late
        answer (``upsert_if_newer``) and a watch replaying history are refused alike."""
        tomb = self._tombstones.get(key) if key not in self._store else None
        return tomb is not None and (uid == tomb[0] or not _strictly_newer(rv, tomb[1]))

    def _newer_in_cache(self, key: str, rv: str) -> bool:
        """True when the cached copy of ``key`` is a later revision than ``rv``."""
        cached = self._rv_of.get(key)
        return cached is not None and _strictly_newer(cached, rv)

    async def _watch_once(self, scope: str | None, rv: str) -> str:
        lo, hi = self.watch_timeout
        async with self.client.watch(
            self.resource, scope, resource_version=rv, label_selector=self.label_selector,
            timeout_seconds=random.randint(lo, hi), read_timeout=self.read_timeout,
        ) as events:
            slice_end = time.perf_counter() + WATCH_SLICE
            async for event in events:
                kind = event.get("type")
                obj = event.get("object") or {}
                if kind == "ERROR":
                    code = obj.get("code") if isinstance(obj, dict) else None
                    if code == 410:
                        raise _Gone()
                    raise ApiError(int(code or 0), str(obj.get("reason") or "WatchError"),
                                   str(obj.get("message") or ""))
                new_rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    self._apply(kind, obj)
                if new_rv:
                    rv = self._applied_rv[scope] = new_rv
                if time.perf_counter() >= slice_end:  # a buffered burst: let others run
                    turns = getattr(self.client, "turns", None)  # a test's fake has none
                    await (asyncio.sleep(0) if turns is None else turns.take())
                    slice_end = time.perf_counter() + WATCH_SLICE
        return rv

    async def _list_or_note(self, scope: str | None) -> str | None:
        """LIST ``scope``: its resourceVersion, or None with the failure noted (the
        ``list_failures``/``list_error`` that ``apiwatch`` reads, and a log line)."""
        try:
            rv = await self._gated_list(scope)
        except ApiError as exc:
            self.list_failures += 1
            self.list_error = f"{exc.status} {exc.reason}: {exc.message}"
            level = "info" if exc.not_found else "warning"
            getattr(log, level)("informer.list_failed", resource=self.name, namespace=scope,
                                status=exc.status, reason=exc.reason, error=exc.message)
            return None
        self.list_failures, self.list_error = 0, ""
        return rv

    async def _run_scope(self, scope: str | None) -> None:
        backoff = Backoff()
        rv: str | None = None
        failures = 0
        while True:
            if rv is None:
                rv = await self._list_or_note(scope)
                if rv is None:
                    await asyncio.sleep(backoff.next())
                    continue
                failures = 0  # the backoff resets only once a watch has run
            self._applied_rv[scope] = rv
            try:
                rv = await self._watch_once(scope, rv)
                self.observer.watch_restart(self.name, "timeout")
                backoff.reset()
                failures = 0
                continue
            except _Gone:
                self.observer.watch_restart(self.name, "gone")
                log.info("informer.relist", resource=self.name, namespace=scope, why="410")
                rv = None
                await asyncio.sleep(backoff.next())  # a 410 storm must not spin LIST+WATCH
                continue
            except ApiError as exc:
                reason = "gone" if exc.gone else "error"
                self.observer.watch_restart(self.name, reason)
                if exc.gone:
                    rv = None
                    await asyncio.sleep(backoff.next())
                    continue
                log.warning("informer.watch_failed", resource=self.name, namespace=scope,
                            status=exc.status, reason=exc.reason, error=exc.message)
            except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
                self.observer.watch_restart(self.name, "stream_error")
                log.info("informer.stream_broken", resource=self.name, namespace=scope,
                         error=repr(exc))
            except Exception as exc:  # never let one bad event end the cache
                self.observer.watch_restart(self.name, "bug")
                log.exception("informer.unexpected", resource=self.name, namespace=scope,
                              error=repr(exc))
                rv = None
            if rv is not None:  # resume after the last event applied, never replay it
                rv = self._applied_rv.get(scope, rv)
            failures += 1
            if failures >= self.relist_after_failures:
                rv = None
            await asyncio.sleep(backoff.next())

    async def run(self) -> None:
        """List and watch every scope until cancelled."""
        tasks = [asyncio.create_task(self._run_scope(s), name=f"informer-{self.name}-{s}")
                 for s in self.scopes]
        try:
            await asyncio.gather(*tasks)
        finally:
            await cancel_and_wait(tasks)

    async def wait_synced(self, timeout: float | None = None) -> bool:
        """Wait until every scope was listed once; False on timeout."""
        try:
            async with asyncio.timeout(timeout):
                await self.synced.wait()
        except TimeoutError:
            return False
        return True
