"""Crawl-delay policy: turn robots.txt Crawl-delay signals into one conservative per-host delay.

StormCrawler's ``CrawlDelayPolicy`` behind ``QueueRegulatorBolt``
(apache/stormcrawler #1979), adapted to squall: there is no RPC to URLFrontier. The host's state is
a :class:`CrawlDelayState` record in a table, and the owner of the host's
partition applies each signal with :func:`observe_crawl_delay` and writes the result
back only when it is a different object. Hence no in-flight call, no failed-RPC
floor; what remains is the value rule:

* the maximum observed value wins: a shorter delay never lowers the pace while
  the previous maximum is inside the decay window
  (``frontier.robots.delay.decay.secs``);
* a lower value applies only once that maximum has aged out of the window;
* a higher value replaces at once and restarts the window;
* repeated values inside the window are not written again (deduplication);
* delays are whole seconds rounded up (never faster than robots.txt), capped
  at ``frontier.robots.delay.max.secs``; a delay of 0 is never set — a site
  that drops its Crawl-delay may stay slower than necessary, never faster.

Kafka delivers at least once and not always in order, so signals carry the
time they were observed (``at_s``) and optionally an id; applying a signal
twice, or an old one after a newer one, changes nothing that ordered delivery
would not have changed (see :func:`observe_crawl_delay`).

Pure: time is passed in (``at_s``, seconds on the caller's clock, which must
be the same for every signal of a host — Unix time when signals cross workers).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    from squall.settings import Settings


@dataclass(frozen=True)
class CrawlDelayState:
    """The robots crawl delay of one host, as stored in the hosts table.

    Fields:
        delay_s: delay (whole s) applied to the host's queue; None = none set.
        max_observed_s: the requested value (whole s, before the
            ``max_delay_s`` cap) of the signal that set ``delay_s``.
        max_observed_at_s: when that signal was observed (s); the decay
            window runs from here.
        last_signal_id: id of the last signal that changed the state, if the
            producer gave one (re-delivery detection).
    """

    delay_s: int | None = None
    max_observed_s: int | None = None
    max_observed_at_s: float | None = None
    last_signal_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict with the field names as keys."""
        return {
            "delay_s": self.delay_s,
            "max_observed_s": self.max_observed_s,
            "max_observed_at_s": self.max_observed_at_s,
            "last_signal_id": self.last_signal_id,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CrawlDelayState:
        """Inverse of :meth:`to_dict`; missing keys are None.

        Raises:
            ValueError: a field of the wrong type.
        """

        def num(name: str, kind: type) -> Any:
            value = data.get(name)
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"CrawlDelayState.{name}: expected a number, got {value!r}")
            return kind(value)

        signal_id = data.get("last_signal_id")
        if signal_id is not None and not isinstance(signal_id, str):
            raise ValueError(f"CrawlDelayState.last_signal_id: expected a string, got {signal_id!r}")
        return cls(
            delay_s=num("delay_s", int),
            max_observed_s=num("max_observed_s", int),
            max_observed_at_s=num("max_observed_at_s", float),
            last_signal_id=signal_id,
        )


@dataclass(frozen=True)
class CrawlDelayConfig:
    """Settings of the crawl-delay policy.

    Fields:
        enabled: ``frontier.robots.crawl.delay.enabled``; False = every signal ignored.
        max_delay_s: ``frontier.robots.delay.max.secs``, cap (whole s, >= 1).
        decay_s: ``frontier.robots.delay.decay.secs``, how long (s, >= 0) a
            maximum holds against lower values.

    Raises:
        ValueError: ``max_delay_s`` < 1 or ``decay_s`` negative / not finite.
    """

    enabled: bool
    max_delay_s: int
    decay_s: float

    def __post_init__(self) -> None:
        if isinstance(self.max_delay_s, bool) or not isinstance(self.max_delay_s, int) or self.max_delay_s < 1:
            raise ValueError(f"max_delay_s must be an int >= 1, got {self.max_delay_s!r}")
        if not math.isfinite(self.decay_s) or self.decay_s < 0:
            raise ValueError(f"decay_s must be a finite number >= 0, got {self.decay_s!r}")

    @classmethod
    def from_settings(cls, settings: Settings) -> CrawlDelayConfig:
        """Copy the ``frontier.robots.*`` keys (checked by :mod:`squall.settings.rules`)."""
        return cls(
            enabled=settings.frontier_robots_crawl_delay_enabled,
            max_delay_s=settings.frontier_robots_delay_max_secs,
            decay_s=float(settings.frontier_robots_delay_decay_secs),
        )


@overload
def observe_crawl_delay(
    state: CrawlDelayState, requested_s: float, at_s: float, config: CrawlDelayConfig, signal_id: str | None = None
) -> CrawlDelayState: ...


@overload
def observe_crawl_delay(
    state: None, requested_s: float, at_s: float, config: CrawlDelayConfig, signal_id: str | None = None
) -> CrawlDelayState | None: ...


def observe_crawl_delay(
    state: CrawlDelayState | None,
    requested_s: float,
    at_s: float,
    config: CrawlDelayConfig,
    signal_id: str | None = None,
) -> CrawlDelayState | None:
    """Apply one robots Crawl-delay signal to a host's state (StormCrawler's CrawlDelayPolicy, max-observed-wins).

    Args:
        state: the host's current state; None = no record yet.
        requested_s: the Crawl-delay (s) robots.txt asked for (may be fractional).
        at_s: when the fetcher observed it (s).
        config: see :class:`CrawlDelayConfig`.
        signal_id: the signal's id (e.g. topic/partition/offset), if any.

    Returns:
        ``state`` itself (the same object, possibly None) when nothing changes —
        the caller writes the record only when ``result is not state`` — else a
        new state. Rules, in order:

        1. disabled, or a ``requested_s`` that is not a finite number: unchanged;
        2. ``signal_id`` equal to ``last_signal_id``: unchanged (re-delivery);
        3. value = ceil(``requested_s``) capped at ``max_delay_s``; a value
           below 1 (0 or negative) is never set: unchanged;
        4. no delay yet: set it, window starts at ``at_s``;
        5. a signal older than the current maximum (``at_s`` <
           ``max_observed_at_s``) never lowers nor repeats: it only raises, and
           only if it was inside that maximum's window (it would have won had
           it arrived in order), the window then starting at its ``at_s``;
        6. higher value: replaces at once, window restarts at ``at_s``;
        7. same or lower value while the maximum is in its window
           (``at_s - max_observed_at_s < decay_s``): unchanged;
        8. same or lower value after the window: applies (a same value
           refreshes the window).
    """
    if not config.enabled:
        return state
    if isinstance(requested_s, bool) or not isinstance(requested_s, (int, float)) or not math.isfinite(requested_s):
        return state
    if signal_id is not None and state is not None and signal_id == state.last_signal_id:
        return state
    requested = math.ceil(requested_s)  # whole seconds, rounded up: never faster than robots.txt
    value = min(requested, config.max_delay_s)
    if value < 1:
        return state  # a delay of 0 is never set: it would erase the pace, not slow it

    def new() -> CrawlDelayState:
        return CrawlDelayState(
            delay_s=value, max_observed_s=requested, max_observed_at_s=at_s, last_signal_id=signal_id
        )

    if state is None or state.delay_s is None or state.max_observed_at_s is None:
        return new()
    current, since_s = state.delay_s, state.max_observed_at_s
    if at_s < since_s:
        # Late (re-)delivery: it may only raise, and only if the current
        # maximum was observed inside its window.
        if value > current and since_s - at_s < config.decay_s:
            return new()
        return state
    if value > current:
        return new()
    if value == current and at_s == since_s:
        return state  # the same observation again (no id): idempotent even with decay_s 0
    if at_s - since_s < config.decay_s:
        return state  # maximum still in its window: lower or repeated values change nothing
    return new()
