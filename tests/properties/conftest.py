"""Hypothesis profiles of the property tests: ``ci`` (default, seconds) and ``long`` (>= 10 000 cases per test).

``SQUALL_HYPOTHESIS_PROFILE=long scripts/test.sh tests/properties`` runs the
long profile. Both are derandomized per test (the same cases every run) so
CI is reproducible; ``SQUALL_HYPOTHESIS_SEED`` picks other cases.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
           "print_blob": True}
settings.register_profile("ci", max_examples=200, derandomize="SQUALL_HYPOTHESIS_SEED" not in os.environ, **_COMMON)
settings.register_profile("long", max_examples=10_000, derandomize="SQUALL_HYPOTHESIS_SEED" not in os.environ,
                          **_COMMON)
settings.load_profile(os.environ.get("SQUALL_HYPOTHESIS_PROFILE", "ci"))
