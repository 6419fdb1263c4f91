"""``kubectl ome handover``'s table: phase, LWS groups and Instances per component."""

from __future__ import annotations

from omenative_controller.cli.handover_output import (
    format_handover,
    handover_json,
    handover_rows,
)

LWS = {"metadata": {"name": "lws-chat-engine"}, "spec": {"replicas": 1},
       "status": {"readyReplicas": 1}}
IR = {"metadata": {"name": "chat-engine"}, "spec": {"replicas": 2},
      "status": {"readyReplicas": 1}}


def isvc(reason: str | None) -> dict[str, object]:
    conds = [] if reason is None else [{"type": "LWSHandover", "status": "True",
                                        "reason": reason, "message": "1/2 Instances serving"}]
    return {"metadata": {"name": "chat"},
            "status": {"components": {"engine": {"conditions": conds}}}}


def test_a_running_handover_shows_both_workloads_and_the_message() -> None:
    rows = handover_rows(isvc("Surging"), {"engine": LWS}, {"engine": IR})
    text = format_handover("chat", rows)
    lines = text.splitlines()
    assert lines[0].split() == ["COMPONENT", "PHASE", "LWS", "GROUPS", "INSTANCES"]
    assert lines[1].split() == ["engine", "Surging", "1/1", "1/2"]
    assert lines[2] == "engine: 1/2 Instances serving"
    assert handover_json(rows)[0]["lws"] == "lws-chat-engine"


def test_an_lws_without_a_condition_is_still_multinode_and_no_lws_is_done() -> None:
    (row,) = handover_rows(isvc(None), {"engine": LWS}, {"engine": None})
    assert (row.phase, row.instances_ready) == ("MultiNode", None)
    (row,) = handover_rows(isvc("Surging"), {"engine": None}, {"engine": IR})
    assert (row.phase, row.lws_ready, row.message) == ("Done", None, "")
    assert "-" in format_handover("chat", [row]).splitlines()[1].split()


def test_nothing_to_show_says_so() -> None:
    assert "no LeaderWorkerSet" in format_handover("chat", handover_rows(isvc(None), {}, {}))


def test_groups_going_away_are_not_shown_as_ready() -> None:
    going = {**LWS, "spec": {"replicas": 1}, "status": {"readyReplicas": 2}}
    (row,) = handover_rows(isvc("Surging"), {"engine": going}, {"engine": IR})
    assert (row.lws_ready, row.lws_desired) == (1, 1)
