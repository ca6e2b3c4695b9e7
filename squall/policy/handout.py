"""Which due URLs of a host leave now: the hand-out decision of the spout and the status updater.

A host gets URLs only while it has a free place (``frontier.handout.ahead``
hand-outs ahead of its delay, :func:`squall.policy.frontier.handout_places`)
and its earliest start — delay, Retry-After, back-off — is within
``frontier.handout.lead.secs`` of the time asked about
(:meth:`squall.policy.frontier.HostRecord.eligible_at_s`). URLFrontier's
``GetURLs`` with ``max_urls_per_queue`` (``frontier.max.urls.per.bucket``)
is the model. Pure: the current time is passed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from squall.policy.frontier import HostRecord
from squall.policy.reasons import Status
from squall.policy.schedule import UrlRecord

if TYPE_CHECKING:
    from squall.settings import Settings

_DUE_VALUES = frozenset((Status.DISCOVERED.value, Status.FETCH_ERROR.value))


@dataclass(frozen=True)
class HandoutConfig:
    """The hand-out keys: ``ahead`` (URLs out at once ahead of the delay), ``lead_s`` (s), ``inflight_timeout_s`` (s)."""

    ahead: int  # frontier.handout.ahead
    lead_s: float  # frontier.handout.lead.secs
    inflight_timeout_s: float  # frontier.inflight.timeout.secs
    per_bucket: int  # frontier.max.urls.per.bucket

    @classmethod
    def from_settings(cls, settings: Settings) -> HandoutConfig:
        return cls(
            ahead=settings.frontier_handout_ahead,
            lead_s=settings.frontier_handout_lead_secs,
            inflight_timeout_s=settings.frontier_inflight_timeout_secs,
            per_bucket=settings.frontier_max_urls_per_bucket,
        )


def due_at_s(status: str, next_fetch_at_s: float | None, blocked_until_s: float | None) -> float | None:
    """When a URL is due (Unix s): its next fetch time, or its host's block if later; None when never.

    The one "due" of the crawl, read by ``/metrics`` (``squall_due_urls``) and
    ``squall status`` alike. ``status`` is the URL record's status value;
    ``blocked_until_s`` its host record's (a Retry-After or back-off, 0 or
    None = none). A URL neither DISCOVERED nor FETCH_ERROR (the statuses it
    waits in to be fetched, again), or without a next fetch time, is never due.
    """
    if next_fetch_at_s is None or status not in _DUE_VALUES:
        return None
    return max(next_fetch_at_s, blocked_until_s or 0.0)


def eligible_at_s(host: HostRecord, now_s: float, config: HandoutConfig) -> float:
    """When ``host`` may get its next hand-out (Unix s), as the due index keeps it."""
    return host.eligible_at_s(config.inflight_timeout_s, now_s, config.ahead, config.lead_s)


def choose(
    host: HostRecord, records: list[tuple[UrlRecord, float]], now_s: float, by_s: float, config: HandoutConfig
) -> list[UrlRecord]:
    """The records of ``records`` (record, due time in Unix s) that ``host`` gets at ``now_s``.

    None unless the host is eligible by ``by_s`` (Unix s); else those due by
    ``now_s``, in order, as far as the host has free places.
    """
    if eligible_at_s(host, now_s, config) > by_s:
        return []
    places = host.places(config.ahead, config.lead_s) - len(host.live_in_flight(config.inflight_timeout_s, now_s))
    return [r for r, at_s in records if at_s <= now_s][: max(0, places)]


def next_soon(host: HostRecord, now_s: float, config: HandoutConfig) -> bool:
    """Whether a host whose result just freed a place gets its next URLs in the same event.

    It does when its earliest start is within one delay (plus the lead) of
    ``now_s``: the steady state of a backlogged host, whose next URL then
    waits at the fetcher when the delay ends. Any other host waits for the
    spout's tick.
    """
    return eligible_at_s(host, now_s, config) <= now_s + host.delay_s
