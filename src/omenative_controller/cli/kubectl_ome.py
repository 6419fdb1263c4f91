"""``kubectl-ome``: a kubectl plugin to inspect and steer OMENative InferenceReplicas and
the rollout groups of InferenceServices.

    kubectl ome instance list llama --component engine
    kubectl ome rollout pause llama-engine --yes
    kubectl ome rollout explain llama
    kubectl ome rollout promote llama --yes
    kubectl ome migration start llama-engine --instance 0 --yes
    kubectl ome advise -A
    kubectl ome handover llama
    kubectl ome wait llama --for=condition=Ready --timeout=30m
    kubectl ome runtime effective llama
    kubectl ome autoscale status llama

Reads print a table (or ``-o json``). Every write shows what will change on which object,
asks ``[y/N]`` unless ``--yes`` is given, and carries the resourceVersion it read, so a
concurrent change makes it fail instead of overwriting. Exit codes: 0 done (or nothing to
do), 1 an error or a write not confirmed, 2 bad usage, 3 refused: a precondition does not
hold or the object changed while we looked at it.

The commands live by group, one module each (``kubectl_instance``, ``kubectl_rollout``,
``kubectl_migration``, ``kubectl_advise``, ``kubectl_handover``, ``kubectl_wait``,
``kubectl_get``, ``kubectl_runtime``, ``kubectl_autoscale``); what they
share (the connection, exit codes, guarded writes, the root group) is in ``kubectl_common``.
This module assembles them and is the entry point (``kubectl-ome``, ``python -m``).
"""

from __future__ import annotations

import sys

import click

from omenative_controller.cli.kubectl_advise import advise_cmd
from omenative_controller.cli.kubectl_autoscale import autoscale
from omenative_controller.cli.kubectl_common import (
    BUDGET_SECONDS,
    EXIT_CONFLICT,
    EXIT_ERROR,
    CliError,
    Target,
    cli,
)
from omenative_controller.cli.kubectl_get import get_cmd
from omenative_controller.cli.kubectl_handover import handover
from omenative_controller.cli.kubectl_instance import instance
from omenative_controller.cli.kubectl_migration import migration, scale
from omenative_controller.cli.kubectl_rollout import rollout
from omenative_controller.cli.kubectl_runtime import runtime
from omenative_controller.cli.kubectl_wait import wait_cmd
from omenative_controller.service_controller import INFERENCE_SERVICES

__all__ = ["BUDGET_SECONDS", "EXIT_CONFLICT", "EXIT_ERROR", "INFERENCE_SERVICES", "CliError",
           "cli", "main"]

for _command in (instance, rollout, migration, scale, advise_cmd, handover, wait_cmd,
                 get_cmd, runtime, autoscale):
    cli.add_command(_command)


def _one_line(exc: BaseException) -> tuple[str, int]:
    """The one stderr line (after ``error: ``) and the exit code for a failure."""
    if isinstance(exc, CliError):
        return exc.message, exc.code
    if isinstance(exc, click.exceptions.Abort):
        return "aborted", EXIT_ERROR
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", 130
    return f"{type(exc).__name__}: {exc}", EXIT_ERROR


def main(argv: list[str] | None = None) -> int:
    """Run the plugin; errors are one line on stderr and a non-zero exit."""
    try:
        code = cli.main(args=argv, prog_name="kubectl ome", standalone_mode=False,
                        obj=Target())
        if isinstance(code, int):  # click returns an Exit's code instead of raising it
            return code
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except (Exception, KeyboardInterrupt) as exc:  # one line, never a traceback
        message, code = _one_line(exc)
        click.echo(f"error: {message}", err=True)
        return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
