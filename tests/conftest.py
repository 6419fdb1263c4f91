"""Test-wide setup: Hypothesis profiles, chosen by ``HYPOTHESIS_PROFILE`` (default ``dev``).

* ``ci``: 100 examples, no deadline, failures print a reproduction blob, too_slow suppressed
  (shared CI runners are slow and noisy);
* ``dev``: 200 examples, the default for a local run;
* ``long``: 2000 examples, for a soak before a release.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# CI explores a fixed set of examples (derandomize): a red CI then means a regression, and
# it reproduces on every machine. Random exploration is the dev and long profiles' job; the
# histories they found that still fail are recorded as open bugs in the issues (2026-12-06:
# a terminating single-pod surge slot not counted by the surge room; a rollout-group
# ready-ratio check), not skipped here.
settings.register_profile(
    "ci",
    max_examples=100,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=200, deadline=None)
settings.register_profile("long", max_examples=2000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
