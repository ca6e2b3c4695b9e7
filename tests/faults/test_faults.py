"""Fault trials: killed workers, a killed broker, churn — nothing lost, never faster than allowed.

One test per trial of the selected profile (tests/faults/schedule.py). Each
prints its seed; ``SQUALL_FAULTS_SEED=<seed>`` re-runs that trial alone.
Goals checked per trial: every expected page reaches a final status, no
request closer than its host's delay or inside a Retry-After, at most one
repeat fetch per URL per kill that found it in flight (unless the machine's
load starved a worker's heartbeats: "unplanned" rebalances re-deliver too), no traceback, and
every worker still running at the end (none needs a person after a broker restart).
"""

from __future__ import annotations

import json
import os

import pytest

from squall.tools import kafka_local

from .conftest import RESULTS
from .runner import run_trial
from .schedule import selected_trials

TRIALS = selected_trials()


@pytest.mark.parametrize("trial", TRIALS, ids=[f"{t.name} seed={t.seed}" for t in TRIALS])
def test_a_fault_trial_loses_nothing_and_stays_polite(trial, kafka_bootstrap, tmp_path):
    if any(f.kind == "broker" for f in trial.faults) and kafka_local.status(kafka_bootstrap)["pid"] is None:
        pytest.skip(f"the broker at {kafka_bootstrap} was not started by squall.tools.kafka_local: it cannot be killed")
    print(f"fault trial {trial.name!r}: seed {trial.seed} (SQUALL_FAULTS_SEED={trial.seed} re-runs it)")
    result = run_trial(trial, kafka_bootstrap, tmp_path)
    RESULTS.append(result.row())
    rows = os.environ.get("SQUALL_FAULTS_ROWS")
    if rows:  # one JSON line per trial, written as soon as it ends
        with open(rows, "a", encoding="utf-8") as out:
            out.write(json.dumps(result.row()) + "\n")
    context = f"seed {trial.seed}, workdir {tmp_path}: {result.row()}"
    assert not result.lost, f"lost {sorted(result.lost)}; {context}"
    assert not result.violations, f"{result.violations[:5]}; {context}"
    if result.unplanned_rebalances == 0:  # a load-starved member's uncommitted work is re-delivered too
        assert result.excess_repeats == 0, f"repeats {dict(result.repeats)}; {context}"
    assert result.tracebacks == 0, context
    assert not result.dead_workers, context
    assert result.finished, context
