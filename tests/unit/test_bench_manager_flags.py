"""The benchmarks start ``omenative-manager`` with options named as the manager names them.

``make bench-memory`` once broke because ``memory_record.py`` built the manager's settings
by hand and missed new ones. Now every benchmark passes only the options it sets, by the
manager's own option names (``processes.manager_argv``), and the manager's parser fills in
the rest: these tests parse what each benchmark would pass with the manager's real command
line, so a renamed or dropped option fails here, without a cluster.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_controller
import memory_record
from processes import manager_argv

from omenative_controller.cli.manager import main as manager_command


def parsed(argv: list[str]) -> dict[str, object]:
    """The manager's parameters after parsing ``argv`` (nothing is run)."""
    with manager_command.make_context("omenative-manager", argv) as ctx:
        return dict(ctx.params)


def test_bench_controller_defaults_reach_the_manager_as_set() -> None:
    args = bench_controller.build_parser().parse_args([])
    params = parsed(manager_argv(bench_controller.manager_flags(args)))
    assert params["workers"] == args.workers and params["max_inflight"] == args.max_inflight
    assert params["qps"] == args.qps and params["burst"] == args.burst
    assert params["status_coalesce"] == args.status_coalesce
    assert params["pipeline_creates"] is True
    assert params["creates_per_pass"] is None  # not given: the manager's own default


def test_bench_controller_switches_reach_the_manager() -> None:
    args = bench_controller.build_parser().parse_args(
        ["--no-pipeline-creates", "--creates-per-pass", "8", "--status-coalesce", "0"])
    params = parsed(manager_argv(bench_controller.manager_flags(args)))
    assert params["pipeline_creates"] is False and params["creates_per_pass"] == 8
    assert params["status_coalesce"] == 0.0


def test_memory_record_sets_its_few_options_and_the_manager_defaults_the_rest() -> None:
    params = parsed(manager_argv({"namespaces": ("bench-mem",), **memory_record.MANAGER_FLAGS}))
    defaults = parsed([])
    assert params["workers"] == 2 and params["status_coalesce"] == 0.0
    assert params["namespaces"] == ("bench-mem",)
    for name in ("creates_per_pass", "pipeline_creates", "status_readiness_coalesce", "qps"):
        assert params[name] == defaults[name], name


def test_an_option_the_manager_lacks_is_refused() -> None:
    with pytest.raises(KeyError, match="no option creates_per_second"):
        manager_argv({"creates_per_second": 3})


def test_the_argv_is_the_manager_s_own_syntax() -> None:
    argv = manager_argv({"kubeconfig": Path("/k"), "namespaces": ("a", "b"),
                         "pipeline_creates": False, "status_coalesce": 2.5,
                         "creates_per_pass": None})
    assert argv == ["--kubeconfig", "/k", "--namespace", "a", "--namespace", "b",
                    "--no-pipeline-creates", "--status-coalesce", "2.5"]
    with pytest.raises(click.UsageError):
        parsed([*argv, "--workers", "0"])
