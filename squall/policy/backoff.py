"""Back-off for rate-limited hosts: Retry-After, exponential back-off with jitter, token bucket.

StormCrawler #1973 (explicit Retry-After) / #1984
(adaptive back-off for 429/503 without Retry-After, reported through the
queue stream). The state of one host is a :class:`HostBackoff` record (a table
value, see ``to_dict``); the functions here compute the next record and the
caller turns ``blocked_until_s`` into
:meth:`squall.policy.fetch_queues.FetchQueues.block_until` / a frontier block.

Pure: the current time (``now_s``, seconds) and randomness (a
``random.Random``) are passed in. :func:`parse_retry_after` returns Unix time,
so callers that mix it with the other functions use Unix time for ``now_s``.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from squall.settings import Settings

_DELTA_SECONDS = re.compile(r"[0-9]+")
# The three HTTP-date forms of RFC 9110 §5.6.7, with named parts; only GMT is a zone.
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAY_NAME = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|mon|tue|wed|thu|fri|sat|sun)"
_MONTH = r"(?P<month>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)"
_TIME = r"(?P<hour>[0-9]{2}):(?P<minute>[0-9]{2}):(?P<second>[0-9]{2})"
_IMF_FIXDATE = re.compile(
    rf"{_DAY_NAME}\s*,\s*(?P<day>[0-9]{{1,2}})\s+{_MONTH}\s+(?P<year>[0-9]{{4}})\s+{_TIME}\s+GMT", re.IGNORECASE
)
_RFC850_DATE = re.compile(
    rf"{_DAY_NAME}\s*,\s*(?P<day>[0-9]{{1,2}})-{_MONTH}-(?P<year>[0-9]{{2}}|[0-9]{{4}})\s+{_TIME}\s+GMT", re.IGNORECASE
)
_ASCTIME_DATE = re.compile(
    rf"{_DAY_NAME}\s+{_MONTH}\s+(?P<day>[0-9]{{1,2}})\s+{_TIME}\s+(?P<year>[0-9]{{4}})", re.IGNORECASE
)

# base_s * 2**attempts is computed with the exponent capped here: 2**64 times
# any positive base is far above any sane max_s, and it keeps floats finite.
_MAX_EXPONENT = 64


def parse_retry_after(value: str | None, now_s: float) -> float | None:
    """Parse an HTTP Retry-After header into the absolute Unix time (s) at which to retry.

    RFC 9110 §10.2.3: ``delay-seconds`` (a non-negative decimal integer) or an
    ``HTTP-date`` (:func:`parse_http_date`: IMF-fixdate, or the obsolete
    RFC 850 and asctime forms; always GMT).

    Args:
        value: the header value; None = header absent.
        now_s: current Unix time (s); also decides the century of an RFC 850
            two-digit year.

    Returns:
        ``now_s + delay`` for delay-seconds; the date's Unix time for an
        HTTP-date, but never before ``now_s`` (a past date means "now"); None
        when absent or invalid ('soon', '-5', '1.5', '', a zone other than
        GMT) — callers treat invalid as absent (lenient parser, never an
        exception).
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    if _DELTA_SECONDS.fullmatch(text):
        digits = text.lstrip("0") or "0"  # a 5000-digit value must not raise (int() limit, float overflow)
        return now_s + (int(digits) if len(digits) <= 12 else 10**12)  # >31 000 years: capped by callers
    at_s = parse_http_date(text, now_s)
    return None if at_s is None else max(at_s, now_s)


def parse_http_date(text: str, now_s: float) -> float | None:
    """Parse an HTTP-date (RFC 9110 §5.6.7) into Unix time (s); None if it is not one.

    The three forms, read leniently (names in any case and short or long,
    any run of white space where the grammar has one space, the day name not
    checked against the date):

    * IMF-fixdate ``Sun, 06 Nov 1994 08:49:37 GMT``;
    * RFC 850 ``Sunday, 06-Nov-94 08:49:37 GMT`` — a two-digit year is read
      in the century of ``now_s``, unless that puts the date more than 50
      years after ``now_s``: then it is the most recent past year with those
      digits (RFC 9110 §5.6.7; in 2026 ``70`` is 2070 and ``99`` is 1999);
    * asctime ``Sun Nov  6 08:49:37 1994`` (no zone: GMT).

    An HTTP-date is always GMT: any other zone (``UTC``, ``+0000``,
    ``PST``) makes the value invalid, like a day, month or time out of range.
    """
    match = _IMF_FIXDATE.fullmatch(text) or _RFC850_DATE.fullmatch(text) or _ASCTIME_DATE.fullmatch(text)
    if match is None:
        return None
    parts = match.groupdict()
    second = int(parts["second"])
    if second > 60:  # 60: a leap second (RFC 9110 §5.6.7 allows it)
        return None
    try:
        when = datetime(
            int(parts["year"]),
            _MONTHS.index(parts["month"].lower()) + 1,
            int(parts["day"]),
            int(parts["hour"]),
            int(parts["minute"]),
            tzinfo=UTC,
        ) + timedelta(seconds=second)
        if len(parts["year"]) == 2:
            when = _in_its_century(when, now_s)
    except (ValueError, OverflowError):
        return None
    return when.timestamp()


def _in_its_century(when: datetime, now_s: float) -> datetime:
    """Move a two-digit-year date (year 0–99) to the year RFC 9110 §5.6.7 says it means.

    The century of ``now_s``, unless that is more than 50 years after
    ``now_s``: then the century before (the most recent past year with those
    digits). Raises ValueError or OverflowError when the date does not exist
    in that year (29 February) or ``now_s`` is out of the calendar's range.
    """
    now = datetime.fromtimestamp(now_s, UTC)
    candidate = when.replace(year=now.year // 100 * 100 + when.year)
    if candidate > _years_later(now, 50):
        return candidate.replace(year=candidate.year - 100)
    return candidate


def _years_later(moment: datetime, years: int) -> datetime:
    """``moment`` on the same calendar day ``years`` later (29 February → 28 February)."""
    try:
        return moment.replace(year=moment.year + years)
    except ValueError:
        return moment.replace(year=moment.year + years, day=28)


@dataclass(frozen=True)
class BackoffConfig:
    """Back-off settings (seconds).

    Fields:
        base_s: ``frontier.backoff.base.secs``, first back-off delay (>= 0).
        max_s: ``frontier.backoff.max.secs``, cap of every back-off and of
            Retry-After blocks (>= base_s).
        ttl_s: ``frontier.backoff.ttl.secs``, after this long still backing
            off a host is deprioritised (>= 0).

    Raises:
        ValueError: a negative or non-finite value, or max_s < base_s.
    """

    base_s: float
    max_s: float
    ttl_s: float

    def __post_init__(self) -> None:
        for name in ("base_s", "max_s", "ttl_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
        if self.max_s < self.base_s:
            raise ValueError(f"max_s ({self.max_s}) must be >= base_s ({self.base_s})")

    @classmethod
    def from_settings(cls, settings: Settings) -> BackoffConfig:
        """Copy ``frontier.backoff.base.secs``, ``.max.secs`` and ``.ttl.secs`` (checked by :mod:`squall.settings.rules`)."""
        return cls(
            base_s=settings.frontier_backoff_base_secs,
            max_s=settings.frontier_backoff_max_secs,
            ttl_s=float(settings.frontier_backoff_ttl_secs),
        )


@dataclass(frozen=True)
class HostBackoff:
    """Back-off state of one host.

    Fields:
        attempts: consecutive rate-limited responses without Retry-After
            (the exponent of the next back-off); 0 = none.
        blocked_until_s: no fetch of the host before this time (s); 0.0 = not blocked.
        backing_off_since_s: when the current back-off episode began (s);
            None = not backing off. Reset by :func:`on_success`.
    """

    attempts: int = 0
    blocked_until_s: float = 0.0
    backing_off_since_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict with the field names as keys."""
        return {
            "attempts": self.attempts,
            "blocked_until_s": self.blocked_until_s,
            "backing_off_since_s": self.backing_off_since_s,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HostBackoff:
        """Inverse of :meth:`to_dict`; missing keys take the defaults.

        Raises:
            ValueError: a field of the wrong type.
        """
        attempts = data.get("attempts", 0)
        blocked = data.get("blocked_until_s", 0.0)
        since = data.get("backing_off_since_s")
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 0:
            raise ValueError(f"HostBackoff.attempts: expected an int >= 0, got {attempts!r}")
        for name, value in (("blocked_until_s", blocked), ("backing_off_since_s", since)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ValueError(f"HostBackoff.{name}: expected a number, got {value!r}")
        return cls(
            attempts=attempts,
            blocked_until_s=float(blocked or 0.0),
            backing_off_since_s=None if since is None else float(since),
        )


_IDLE = HostBackoff()


def on_retry_after(state: HostBackoff | None, until_s: float, now_s: float, config: BackoffConfig) -> HostBackoff:
    """Block a host that answered with Retry-After until ``until_s`` (StormCrawler #1973).

    Args:
        state: the host's state; None = none yet.
        until_s: retry time (s) from :func:`parse_retry_after`.
        now_s: current time (s), same clock.

    Returns:
        A state blocked until min(``until_s``, ``now_s + max_s``) — a server
        cannot park a host longer than the cap — but never earlier than an
        existing block; ``attempts`` unchanged (the exponential series is for
        headerless rate limits). ``state`` itself when nothing changes.
    """
    state = state or _IDLE
    blocked_until_s = max(state.blocked_until_s, min(until_s, now_s + config.max_s))
    since_s = state.backing_off_since_s if state.backing_off_since_s is not None else now_s
    if blocked_until_s == state.blocked_until_s and since_s == state.backing_off_since_s:
        return state
    return HostBackoff(attempts=state.attempts, blocked_until_s=blocked_until_s, backing_off_since_s=since_s)


def backoff_delay_s(attempts: int, config: BackoffConfig) -> float:
    """The un-jittered back-off (s) after ``attempts`` earlier rate limits: min(max_s, base_s * 2**attempts)."""
    return min(config.max_s, config.base_s * 2.0 ** min(attempts, _MAX_EXPONENT))


def on_rate_limited(state: HostBackoff | None, now_s: float, config: BackoffConfig, rng: random.Random) -> HostBackoff:
    """Back off a host that answered 429/503 without Retry-After (StormCrawler #1984).

    delay = min(max_s, base_s * 2**attempts); the wait is delay + jitter,
    jitter uniform in [0, delay/2] (spreads retries after an outage), the
    total capped at max_s. Jitter only adds: the wait is never below the
    un-jittered delay (STYLE.md: no jitter below the configured minimum), so at
    the cap there is no jitter.

    Returns:
        A new state: blocked until max(existing block, now_s + wait),
        ``attempts`` + 1, ``backing_off_since_s`` kept or set to ``now_s``.
    """
    state = state or _IDLE
    delay_s = backoff_delay_s(state.attempts, config)  # exponential growth, capped
    wait_s = min(config.max_s, delay_s + rng.uniform(0.0, delay_s / 2))  # jitter adds, cap holds
    wait_s = max(wait_s, delay_s)  # guard float rounding: never below the un-jittered delay
    return HostBackoff(
        attempts=state.attempts + 1,
        blocked_until_s=max(state.blocked_until_s, now_s + wait_s),
        backing_off_since_s=state.backing_off_since_s if state.backing_off_since_s is not None else now_s,
    )


def on_success(state: HostBackoff | None) -> HostBackoff:
    """Reset a host after a successful fetch: no attempts, no block, not backing off.

    Returns ``state`` itself when it is already reset.
    """
    if state is not None and state == _IDLE:
        return state
    return _IDLE


def deprioritised(state: HostBackoff | None, now_s: float, config: BackoffConfig) -> bool:
    """True when the host has been backing off for ``ttl_s`` or more (it moves to a low-priority queue).

    "Backing off" lasts from the first rate limit until :func:`on_success`.
    """
    if state is None or state.backing_off_since_s is None:
        return False
    return now_s - state.backing_off_since_s >= config.ttl_s


@dataclass(frozen=True)
class TokenBucket:
    """A per-queue token bucket (a second layer on top of the delay): tokens left at ``updated_at_s``.

    Fields:
        tokens: tokens available (0..burst, fractional while refilling).
        updated_at_s: time (s) at which ``tokens`` was computed.
    """

    tokens: float
    updated_at_s: float

    @classmethod
    def full(cls, burst: int, now_s: float) -> TokenBucket:
        """A bucket holding ``burst`` tokens at ``now_s``."""
        return cls(tokens=float(burst), updated_at_s=now_s)


def try_take(
    bucket: TokenBucket | None, now_s: float, rate_per_s: float, burst: int
) -> tuple[bool, TokenBucket | None, float]:
    """Take one token if there is one (``fetcher.server.rate`` / ``fetcher.server.burst``).

    Args:
        bucket: the queue's bucket; None = new, starts full.
        now_s: current time (s).
        rate_per_s: refill rate (tokens/s); 0 = bucket off, always allowed.
        burst: capacity (tokens, >= 1).

    Returns:
        ``(allowed, bucket, wait_s)``: whether a fetch may start now, the new
        bucket (``bucket`` unchanged when the rate is 0), and when not allowed
        how long (s) until the next token.

    Raises:
        ValueError: ``rate_per_s`` negative or not finite, or ``burst`` < 1.
    """
    if not math.isfinite(rate_per_s) or rate_per_s < 0:
        raise ValueError(f"rate_per_s must be a finite number >= 0, got {rate_per_s!r}")
    if burst < 1:
        raise ValueError(f"burst must be >= 1, got {burst!r}")
    if rate_per_s == 0:
        return True, bucket, 0.0
    if bucket is None:
        bucket = TokenBucket.full(burst, now_s)
    elapsed_s = max(0.0, now_s - bucket.updated_at_s)  # a clock going backwards refills nothing
    tokens = min(float(burst), bucket.tokens + elapsed_s * rate_per_s)  # refill, never above burst
    updated_at_s = max(now_s, bucket.updated_at_s)
    if tokens >= 1.0:
        return True, TokenBucket(tokens=tokens - 1.0, updated_at_s=updated_at_s), 0.0
    return False, TokenBucket(tokens=tokens, updated_at_s=updated_at_s), (1.0 - tokens) / rate_per_s
