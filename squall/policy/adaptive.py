"""Adaptive revisits: how a FETCHED page's revisit interval follows its changes (pure).

StormCrawler's AdaptiveScheduler (``scheduler.adaptive.*``): an unchanged
payload digest, or a 304, grows the interval by 1 + rate.incr up to the
maximum; a new digest moves it towards the minimum; the first fetch keeps
the default. :mod:`squall.policy.schedule` applies it to a URL's record.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from squall.settings import Settings


@dataclass(frozen=True)
class AdaptiveConfig:
    """StormCrawler's AdaptiveScheduler: interval bounds in SECONDS (its keys are minutes), rates in (0, 1]."""

    min_interval_s: float  # scheduler.adaptive.fetchInterval.min
    max_interval_s: float  # scheduler.adaptive.fetchInterval.max
    rate_incr: float  # scheduler.adaptive.fetchInterval.rate.incr
    rate_decr: float  # scheduler.adaptive.fetchInterval.rate.decr

    @classmethod
    def from_settings(cls, settings: Settings) -> AdaptiveConfig:
        return cls(
            settings.scheduler_adaptive_fetch_interval_min * 60.0,
            settings.scheduler_adaptive_fetch_interval_max * 60.0,
            settings.scheduler_adaptive_fetch_interval_rate_incr,
            settings.scheduler_adaptive_fetch_interval_rate_decr,
        )


class IntervalReason(Enum):
    """Why a FETCHED URL's adaptive revisit interval is what it is (``interval_reason`` of its record)."""

    FIRST = "first"  # no earlier digest to compare with: the default interval (or the sitemap changefreq)
    UNCHANGED = "unchanged"  # the payload digest is the last fetch's: the interval grew
    NOT_MODIFIED = "not_modified"  # a 304 answer: the interval grew
    CHANGED = "changed"  # a new payload digest: the interval shrank


def adaptive_interval(
    previous_s: float | None,
    old_digest: str | None,
    new_digest: str | None,
    not_modified: bool,
    default_s: float,
    config: AdaptiveConfig,
) -> tuple[float, IntervalReason]:
    """The next revisit interval (s) of a FETCHED page and why (StormCrawler's AdaptiveScheduler rules).

    ``previous_s``: the record's interval (None: none yet, ``default_s`` is
    the starting point). Unchanged digest or 304: × (1 + rate.incr), at most
    the maximum. Changed: (1 − rate.decr) × interval + rate.decr × minimum —
    a step towards the minimum that slows as it nears it. No digest to
    compare (first fetch, or no digest): ``default_s`` kept as the interval.
    """
    interval = default_s if previous_s is None else previous_s
    if not_modified or (old_digest is not None and old_digest == new_digest):
        grown = min(interval * (1.0 + config.rate_incr), config.max_interval_s)
        return grown, IntervalReason.NOT_MODIFIED if not_modified else IntervalReason.UNCHANGED
    if old_digest is None or new_digest is None:
        return interval, IntervalReason.FIRST
    shrunk = (1.0 - config.rate_decr) * interval + config.rate_decr * config.min_interval_s
    return max(shrunk, config.min_interval_s), IntervalReason.CHANGED
