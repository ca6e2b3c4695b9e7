"""The fake clock, a config and the record and result makers the schedule tests share (squall.policy.schedule)."""

from __future__ import annotations

from squall.policy.reasons import Status
from squall.policy.records import StatusMessage
from squall.policy.schedule import ScheduleConfig, UrlRecord

NOW = 1_714_564_800.0  # 2024-05-01 12:00:00 UTC, the fake clock
MIN = 60.0
CONFIG = ScheduleConfig(
    default_interval_s=1440 * MIN,
    fetch_error_interval_s=120 * MIN,
    error_interval_s=None,
    max_fetch_errors=3,
    max_rate_limits=None,
    changefreq_revisit=False,
)
URL = "https://example.com/a"
KEY = "example.com"


def discovered(**kw) -> UrlRecord:
    """A record as new_record makes it: DISCOVERED, due at NOW."""
    fields = dict(url=URL, key=KEY, next_fetch_at_s=NOW, discovered_at_s=NOW)
    fields.update(kw)
    return UrlRecord(**fields)


def result(status: Status, at_s: float, **kw) -> StatusMessage:
    return StatusMessage(url=URL, status=status, fetched_at_s=at_s, **kw)
