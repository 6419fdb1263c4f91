"""A bad ``lifecycle`` entry is reported with every bad key at once, each with its rule."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from omenative_core.model.config import ConfigError, parse_lifecycle_config


def test_every_bad_key_is_named_with_its_rule_in_one_error() -> None:
    raw = json.dumps({
        "instanceReadyTimeout": 30,
        "updateRetry": {"maxAttempts": 0, "multiplier": 0.5, "bogus": 1},
        "audit": {"window": "1h"},
        "gangScheduleTimeout": {"min": "10m", "max": "1m"},
        "instanceStatusEncoding": "Sparse",
        "unknownThing": True,
    })
    with pytest.raises(ConfigError) as err:
        parse_lifecycle_config(raw)
    problems = err.value.problems
    expected = {
        "lifecycle: unknown key(s) unknownThing",
        "lifecycle.updateRetry: unknown key(s) bogus",
        "lifecycle.updateRetry.multiplier: expected a number >= 1, got 0.5",
        "lifecycle.updateRetry.maxAttempts: expected an integer >= 1, got 0",
        "lifecycle.audit: all keys are required, missing "
        "['maxInFlightMigrations', 'maxMigrationsPerWindow']",
        "lifecycle.gangScheduleTimeout: min must not exceed max",
        "lifecycle.instanceStatusEncoding: expected ColumnarV2 or DenseV1, got 'Sparse'",
    }
    assert expected <= set(problems)
    assert any(p.startswith("lifecycle.instanceReadyTimeout: invalid duration 30")
               for p in problems)
    assert len(problems) == len(expected) + 1
    assert str(err.value).startswith(f"{len(problems)} problems: ")
    for p in problems:
        assert p in str(err.value)


def test_one_bad_key_reads_as_before() -> None:
    with pytest.raises(ConfigError) as err:
        parse_lifecycle_config('{"revisionHistoryLimit": "many"}')
    assert str(err.value) == "lifecycle.revisionHistoryLimit: expected an integer >= 1, got 'many'"
    assert err.value.problems == (str(err.value),)


def test_an_empty_required_block_names_what_is_missing() -> None:
    with pytest.raises(ConfigError, match=r"lifecycle\.forceDelete: both keys are required"):
        parse_lifecycle_config('{"forceDelete": {}}')


def test_a_block_of_the_wrong_type_is_one_problem() -> None:
    with pytest.raises(ConfigError) as err:
        parse_lifecycle_config('{"audit": [1], "requeue": "fast"}')
    assert err.value.problems == ("lifecycle.audit: expected an object, got [1]",
                                  "lifecycle.requeue: expected an object, got 'fast'")


def test_zero_audit_window_is_refused_but_a_bad_one_is_reported_once() -> None:
    full = {"maxInFlightMigrations": 1, "maxMigrationsPerWindow": 1}
    with pytest.raises(ConfigError) as err:
        parse_lifecycle_config(json.dumps({"audit": {**full, "window": "0s"}}))
    assert err.value.problems == ("lifecycle.audit.window: must be > 0",)
    with pytest.raises(ConfigError) as err:
        parse_lifecycle_config(json.dumps({"audit": {**full, "window": "soon"}}))
    assert len(err.value.problems) == 1 and "expected a number with a unit" in str(err.value)


def test_valid_settings_still_parse() -> None:
    cfg = parse_lifecycle_config(json.dumps({
        "instanceReadyTimeout": "0s", "teardown": None, "retryBlockHistoryLimit": 0,
        "gangScheduleTimeout": {"min": "5s"}, "scaleUpPodBatchSize": 4,
        "forceDelete": {"overdueSlack": "1m", "nodeUnreachableThreshold": "5m"},
    }))
    assert cfg.instance_ready_timeout is None
    assert cfg.teardown.deadline is None
    assert cfg.retry_block_history_limit == 0
    assert cfg.gang_schedule_timeout.min == timedelta(seconds=5)
    assert cfg.force_delete is not None
    assert cfg.force_delete.node_unreachable_threshold == timedelta(minutes=5)
