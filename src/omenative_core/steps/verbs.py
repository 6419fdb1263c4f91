"""User verbs: the annotations a user sets to act on an InferenceReplica, consumed once.

- ``ome.io/release-held-revision=<name | hash (8+ chars)>``: release a Held RetryBlock.
- ``ome.io/reset-instances=all|i,j``: rebuild those Failed Instances (only those).
- ``ome.io/migration-request-v1-<uuid>``: a migration request (``migrations.accept``).

Each is removed from the object in the same plan (``RemoveAnnotations``) and answered with
an Event that says what was done or why nothing was.
"""

from __future__ import annotations

from attrs import evolve

from omenative_core import restarts
from omenative_core.labels import ANNOTATION_MIGRATION_PREFIX
from omenative_core.model.plan import RemoveAnnotations
from omenative_core.phases import OpType, Phase
from omenative_core.revisions import hash_of
from omenative_core.steps import migrations
from omenative_core.steps.pods import drain
from omenative_core.steps.step_pass import StepPass

__all__ = [
    "ANNOTATION_MIGRATION_PREFIX",
    "ANNOTATION_RELEASE_HELD",
    "ANNOTATION_RESET",
    "consume",
]

ANNOTATION_RELEASE_HELD = "ome.io/release-held-revision"
"""``<revision name | hash>``: release a held revision for another try."""

ANNOTATION_RESET = "ome.io/reset-instances"
"""``all`` or ``i,j,...``: rebuild those Failed Instances now (consumed once)."""



def consume(st: StepPass) -> None:
    """Act on every verb annotation present and remove them."""
    ann = st.view.ir.metadata.annotations
    consumed: list[str] = []
    release = ann.get(ANNOTATION_RELEASE_HELD)
    if release:
        _release_held(st, release)
        consumed.append(ANNOTATION_RELEASE_HELD)
    reset = ann.get(ANNOTATION_RESET)
    if reset is not None:
        _reset(st, reset)
        consumed.append(ANNOTATION_RESET)
    for key, value in sorted(ann.items()):
        if key.startswith(ANNOTATION_MIGRATION_PREFIX):
            migrations.accept(st, key[len(ANNOTATION_MIGRATION_PREFIX) :], value)
            consumed.append(key)
    if consumed:
        st.out.add(RemoveAnnotations(keys=tuple(consumed)))


def _release_held(st: StepPass, release: str) -> None:
    names = (
        [
            n
            for n in st.book.blocks
            if n == release or hash_of(n) == release or hash_of(n).startswith(release)
        ]
        if len(release) >= 8
        else []
    )
    released = [n for n in names if st.book.release(n)]
    if released:
        st.note("RetryBlockReleased", f"released held revision {', '.join(released)}")
    else:
        rule = (
            "no held revision by that name or hash"
            if len(release) >= 8
            else "a revision hash must have 8 characters or more"
        )
        st.warn("RetryBlockReleaseSkipped", f"{ANNOTATION_RELEASE_HELD}={release!r}: {rule}")


def _reset(st: StepPass, value: str) -> None:
    if value == "all":
        wanted = sorted(st.rows)
    else:
        try:
            wanted = sorted({int(v) for v in value.split(",")})
        except ValueError:
            wanted = [-1]
        if min(wanted) < 0:  # OME: "-1" is not a non-negative index, so nothing is reset
            st.warn(
                "InstancesResetRejected",
                f"{ANNOTATION_RESET}={value!r}: expected 'all' or comma-separated "
                "non-negative Instance indexes; nothing reset",
            )
            return
    done: list[int] = []
    skipped: list[str] = []
    evidence: list[str] = []
    for index in wanted:
        row = st.rows.get(index)
        if row is None:
            skipped.append(f"{index}: no such instance")
            continue
        if row.phase != Phase.FAILED:
            skipped.append(f"{index}: Phase={row.phase}")
            continue
        if row.operation is not None and row.operation.type in (
            OpType.UPDATE,
            OpType.MIGRATE,
            OpType.DELETE,
        ):
            skipped.append(f"{index}: owned by {row.operation.type}")
            continue
        pods = st.pods_of(index)
        if any(p.serving_gate and not p.terminating for p in pods):
            skipped.append(f"{index}: still serving")  # OME: draining it is the rollout's job
            continue
        drain(st, pods, "Reset")
        # a reset starts the named Instance afresh (its restart series too: ``restarts``);
        # the revision's RetryBlock, shared by every Instance, is left alone, so a reset
        # touches only the Instances it names (as OME's)
        st.rows[index] = restarts.clear(
            evolve(row, phase=Phase.PENDING, operation=None, last_failure=None))
        done.append(index)
        if row.last_failure is not None:
            evidence.append(f"{index} ({row.last_failure.reason} on {row.last_failure.pod_name})")
    if done:
        st.note("InstancesReset", f"reset Failed Instance(s) {', '.join(map(str, done))}"
                + (f"; last failure: {', '.join(evidence)}" if evidence else ""))
    if skipped or not done:
        st.note("InstancesResetSkipped", "; ".join(skipped) or "nothing to reset")
