"""A worker's progress line at ``-l info``, every ``metrics.log.interval.secs`` (0: never).

Built from what the worker counts anyway — the metrics of :mod:`agents.observe`
(pages FETCHED, the last minute's rate, audit violations), the size of its
due indexes (:mod:`agents.worker_state`) and the hand-outs at its fetcher — so it
costs nothing per page and no table scan.
"""

from __future__ import annotations

import logging
import time

from agents.common import fetch_runtime
from agents.observe import observed
from agents.worker_state import state
from squall.worker.metrics import counter_total, progress_line
from topology import app, settings

log = logging.getLogger("squall.progress")


def current_line(now_s: float) -> str:
    """The progress line of this worker at ``now_s`` (Unix s)."""
    held = observed()
    return progress_line(
        pages=int(counter_total(held.metrics.fetch_results, status="FETCHED")),
        pages_per_s=held.pages.rate(now_s),
        due=sum(len(index) for index in state().indexes.values()),
        in_flight=len(fetch_runtime().copies.active),
        violations=int(counter_total(held.metrics.audit_violations)),
    )


if settings.metrics_log_interval_secs > 0:

    @app.timer(settings.metrics_log_interval_secs)
    async def log_progress() -> None:
        log.info("%s", current_line(time.time()))
