"""robots.txt fetch status: the RFC 9309 decision, cache lifetime and conditional refresh.

Pure policy (no network, no clock): the fetcher hands in what it got
(:class:`RobotsFetchOutcome`) and the current time ``now_s`` (Unix
seconds); :func:`decide` returns a :class:`RobotsEntry`, a frozen,
JSON-serializable value for the robots table. :class:`RobotsCache` keeps
decoded entries in front of that table. The rules themselves are
:mod:`squall.policy.robots_rules`.

Rule sources: RFC 9309 §2.3.1 (status codes, unreachable), §2.4 (caching;
it wins where other readings disagree), the
opt-in permissive 5xx choice, StormCrawler keys ``http.robots.*``.
"""

from __future__ import annotations

import datetime
import email.utils
import re
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from squall.errors import MessageError
from squall.policy.robots_rules import (
    RobotsConfig,
    RobotsKind,
    RobotsRules,
    decode_robots,
    is_truncated,
)

# How an allow-all / disallow-all decision is kept as a "last good copy" text.
_ALLOW_ALL_TEXT = ""
_DISALLOW_ALL_TEXT = "User-agent: *\nDisallow: /\n"
_MAX_AGE = re.compile(r"(?:^|[,\s])max-age\s*=\s*\"?(\d+)\"?", re.IGNORECASE)


@dataclass(frozen=True)
class RobotsFetchOutcome:
    """What the fetcher got for ``/robots.txt`` after following redirects.

    ``status``: final HTTP status, None for a transport failure (timeout,
    DNS, connection). ``body``: raw bytes (the fetcher may cut it at the
    content limit). ``headers``: response headers (case-insensitive names;
    Cache-Control, Expires, Date, ETag and Last-Modified are read).
    ``redirects``: hops followed. ``truncated``: the fetcher already cut the
    body (``http.content.limit``). A ``304`` answers a conditional request
    made with :func:`conditional_headers`.
    """

    status: int | None
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    redirects: int = 0
    truncated: bool = False


@dataclass(frozen=True)
class RobotsEntry:
    """The robots decision for one origin, as stored in the robots table (all times Unix seconds).

    ``kind``: a :class:`RobotsKind` — ``RULES`` (``robots_text`` holds the
    capped text), ``ALLOW_ALL`` or ``DISALLOW_ALL`` (stored as its value). ``expires_at_s``: the entry may be
    used until then (RFC 9309 §2.4: at most ``ttl_s`` after the fetch; for
    an unreachable robots.txt, until the retry). ``unreachable_since_s``:
    first of the current run of failures (None when the last fetch got an
    answer); ``failures`` counts them; ``retry_at_s``: when to fetch again
    after a failure. ``last_good_text`` / ``last_good_at_s``: the last
    answered robots.txt (``""`` = allow all), used after
    ``unreachable_grace_s`` (RFC 9309 §2.3.1.4). ``permissive_fallback``:
    the opt-in ``http.robots.5xx.allow`` was applied (log it).
    ``http_status``: status of the last fetch, None for a transport failure.
    ``truncated``: the last good copy was cut at ``http.robots.content.limit``
    (or by the fetcher's ``http.content.limit``): log it, ``squall status``
    counts it. ``etag`` / ``last_modified``: validators of the last good copy
    (RFC 9110 §8.8), sent on the next fetch (:func:`conditional_headers`);
    only kept from an answer without redirects.
    """

    kind: RobotsKind
    robots_text: str | None
    fetched_at_s: float
    expires_at_s: float
    unreachable_since_s: float | None = None
    failures: int = 0
    retry_at_s: float | None = None
    last_good_text: str | None = None
    last_good_at_s: float | None = None
    permissive_fallback: bool = False
    http_status: int | None = None
    truncated: bool = False
    etag: str | None = None
    last_modified: str | None = None
    _rules_cache: dict[tuple[str, ...], RobotsRules] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        if not isinstance(self.kind, RobotsKind):
            raise ValueError(f"unknown robots entry kind {self.kind!r}")
        if self.kind is RobotsKind.RULES and self.robots_text is None:
            raise ValueError("a 'rules' robots entry needs robots_text")

    def rules(self, config: RobotsConfig) -> RobotsRules:
        """The rules of this entry for ``config.agents`` (built once per agent list)."""
        cached = self._rules_cache.get(config.agents)
        if cached is None:
            if self.kind is RobotsKind.ALLOW_ALL:
                cached = RobotsRules.allow_all()
            elif self.kind is RobotsKind.DISALLOW_ALL:
                cached = RobotsRules.disallow_all()
            else:
                cached = RobotsRules.from_text(self.robots_text or "", config.agents)
            self._rules_cache[config.agents] = cached
        return cached

    def is_fresh(self, now_s: float) -> bool:
        """True while the entry may be used without fetching robots.txt first (``now_s`` < ``expires_at_s``)."""
        return now_s < self.expires_at_s

    def needs_refresh(self, now_s: float, config: RobotsConfig) -> bool:
        """True when a background fetch of robots.txt is due (refreshed before it expires).

        After a failure: once ``retry_at_s`` has come. Otherwise: from
        ``refresh_ahead_s`` seconds before ``expires_at_s``.
        """
        if self.retry_at_s is not None:
            return now_s >= self.retry_at_s
        return now_s >= self.expires_at_s - config.refresh_ahead_s

    @property
    def has_validators(self) -> bool:
        """True when an ETag or a Last-Modified of the last good copy is known."""
        return bool(self.etag or self.last_modified)

    @property
    def blocks_origin(self) -> bool:
        """True when robots.txt is unreachable and nothing may be fetched yet: the host's queue waits.

        A disallow-all chosen for a 401/403 (``http.robots.403.allow: false``)
        does not block: its URLs end as ``robots.denied``. A blocked origin's
        URLs are not attempted and wait (``robots.unavailable``), never denied.
        """
        return self.kind is RobotsKind.DISALLOW_ALL and self.unreachable_since_s is not None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable dict of the stored fields (``kind`` as its value)."""
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        d["kind"] = self.kind.value
        return d

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> RobotsEntry:
        """Rebuild an entry from :meth:`to_dict` output.

        Raises:
            MessageError: not a mapping, a missing or unknown kind, or fields of the wrong type.
        """
        if not isinstance(obj, Mapping):
            raise MessageError("robots entry must be an object")
        try:
            return cls(
                kind=RobotsKind(obj["kind"]),
                robots_text=_opt_str(obj.get("robots_text")),
                fetched_at_s=float(obj["fetched_at_s"]),
                expires_at_s=float(obj["expires_at_s"]),
                unreachable_since_s=_opt_float(obj.get("unreachable_since_s")),
                failures=int(obj.get("failures", 0)),
                retry_at_s=_opt_float(obj.get("retry_at_s")),
                last_good_text=_opt_str(obj.get("last_good_text")),
                last_good_at_s=_opt_float(obj.get("last_good_at_s")),
                permissive_fallback=bool(obj.get("permissive_fallback", False)),
                http_status=None if obj.get("http_status") is None else int(obj["http_status"]),
                truncated=bool(obj.get("truncated", False)),
                etag=_opt_str(obj.get("etag")),
                last_modified=_opt_str(obj.get("last_modified")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise MessageError(f"bad robots entry: {exc!r}") from None


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _opt_str(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


def _http_date_s(value: str | None) -> float | None:
    if not value:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if parsed is None:
        return None
    if parsed.tzinfo is None:  # HTTP-dates are GMT
        parsed = parsed.replace(tzinfo=datetime.UTC)
    return parsed.timestamp()


def cache_ttl_s(headers: Mapping[str, str], now_s: float, config: RobotsConfig) -> float:
    """Seconds a robots.txt answer may be cached: from the headers, at most ``config.ttl_s``.

    ``Cache-Control: max-age`` wins over ``Expires`` (RFC 9111 §5.3);
    ``Expires`` counts from ``Date`` when present, else from ``now_s``; an
    unparseable ``Expires`` is ignored. No usable header → ``ttl_s`` (seed
    002: 24 h). Never more than ``ttl_s`` (RFC 9309 §2.4), never negative.
    """
    ttl: float | None = None
    cache_control = _header(headers, "cache-control")
    if cache_control:
        match = _MAX_AGE.search(cache_control)
        if match:
            ttl = float(match.group(1))
    if ttl is None:
        expires = _http_date_s(_header(headers, "expires"))
        if expires is not None:
            date = _http_date_s(_header(headers, "date"))
            ttl = expires - (date if date is not None else now_s)
    if ttl is None:
        return config.ttl_s
    return max(0.0, min(ttl, config.ttl_s))


def conditional_headers(previous: RobotsEntry | None) -> dict[str, str]:
    """Request headers for refreshing robots.txt: ``If-None-Match`` / ``If-Modified-Since`` of the last good copy.

    ``{}`` when nothing is cached or the copy has no validators (RFC 9110
    §13.1.1, §13.1.3: both are sent when both are known; a server that
    honours If-None-Match ignores the other).
    """
    if previous is None or previous.last_good_text is None:
        return {}
    headers = {}
    if previous.etag:
        headers["If-None-Match"] = previous.etag
    if previous.last_modified:
        headers["If-Modified-Since"] = previous.last_modified
    return headers


def _retry_delay_s(failures: int, config: RobotsConfig) -> float:
    """Back-off after ``failures`` consecutive failures: base, doubling, capped at the max (seconds)."""
    exponent = min(failures - 1, 62)  # 2**62 × base is past any cap; avoids float overflow
    return min(config.retry_base_s * (2.0**exponent), config.retry_max_s)


def decide(
    outcome: RobotsFetchOutcome, previous: RobotsEntry | None, now_s: float, config: RobotsConfig
) -> RobotsEntry:
    """Turn a robots.txt fetch outcome into the origin's new :class:`RobotsEntry`.

    ``previous`` is the stored entry (None if none); ``now_s`` Unix seconds.
    Rules (RFC 9309 §2.3.1):

    * 2xx → parse the body (§2.3.1.1), cached per :func:`cache_ttl_s`; a
      body over ``content_limit`` is cut (``truncated``); ETag and
      Last-Modified are kept (no redirect followed) for a conditional refresh.
    * 304 to a conditional request, with a last good copy: that copy stays
      in force and its lifetime starts again (RFC 9110 §15.4.5, RFC 9111 §4.3.4);
      the validators are kept (updated when the 304 carries new ones).
    * 3xx still after the fetcher's redirects (it follows 5, §2.3.1.2) →
      unavailable: allow all.
    * 401/403 → allow all (§2.3.1.3), or disallow all if ``allow_on_403`` is
      false; other 4xx (not 429) → allow all.
    * 429, 5xx, other statuses, transport failure (None) → unreachable
      (§2.3.1.4): complete disallow, retried after ``retry_base_s`` doubling
      per consecutive failure up to ``retry_max_s``. Exceptions, in order:
      a previous answered entry that is still fresh keeps being used until it
      expires; after ``unreachable_grace_s`` the last good copy is used if
      there is one; ``allow_on_5xx`` uses the last good copy or
      else allows all, with ``permissive_fallback=True``.
    """
    status = outcome.status
    answered = status is not None and (200 <= status < 500) and status != 429
    if answered:
        assert status is not None
        expires_at_s = now_s + cache_ttl_s(outcome.headers, now_s, config)
        validators: dict[str, Any] = {}
        if status == 304 and previous is not None and previous.has_validators and previous.last_good_text is not None:
            # Not modified: the copy the validators name is still the robots.txt; its lifetime restarts.
            text = previous.last_good_text
            return RobotsEntry(
                kind=RobotsKind.RULES,
                robots_text=text,
                fetched_at_s=now_s,
                expires_at_s=expires_at_s,
                last_good_text=text,
                last_good_at_s=now_s,
                http_status=status,
                truncated=previous.truncated,
                etag=_header(outcome.headers, "etag") or previous.etag,
                last_modified=_header(outcome.headers, "last-modified") or previous.last_modified,
            )
        truncated = False
        if 200 <= status < 300:
            text = decode_robots(outcome.body, config.content_limit)
            kind, robots_text, good = RobotsKind.RULES, text, text
            truncated = outcome.truncated or is_truncated(outcome.body, config.content_limit)
            if outcome.redirects == 0:  # validators of a redirect target do not name this URL's copy
                validators = {
                    "etag": _header(outcome.headers, "etag"),
                    "last_modified": _header(outcome.headers, "last-modified"),
                }
        elif status in (401, 403) and not config.allow_on_403:
            kind, robots_text, good = RobotsKind.DISALLOW_ALL, None, _DISALLOW_ALL_TEXT
        else:  # 3xx after the redirects the fetcher follows (or a 304 with nothing cached), and 4xx
            kind, robots_text, good = RobotsKind.ALLOW_ALL, None, _ALLOW_ALL_TEXT
        return RobotsEntry(
            kind=kind,
            robots_text=robots_text,
            fetched_at_s=now_s,
            expires_at_s=expires_at_s,
            last_good_text=good,
            last_good_at_s=now_s,
            http_status=status,
            truncated=truncated,
            **validators,
        )

    # Unreachable (RFC 9309 §2.3.1.4).
    failing = previous is not None and previous.unreachable_since_s is not None
    failures = previous.failures + 1 if failing and previous is not None else 1
    since = previous.unreachable_since_s if failing and previous is not None else now_s
    assert since is not None
    retry_at_s = now_s + _retry_delay_s(failures, config)
    last_good_text = previous.last_good_text if previous is not None else None
    last_good_at_s = previous.last_good_at_s if previous is not None else None
    common: dict[str, Any] = dict(
        fetched_at_s=now_s,
        unreachable_since_s=since,
        failures=failures,
        retry_at_s=retry_at_s,
        last_good_text=last_good_text,
        last_good_at_s=last_good_at_s,
        http_status=status,
        truncated=previous.truncated if previous is not None else False,
        etag=previous.etag if previous is not None else None,
        last_modified=previous.last_modified if previous is not None else None,
    )

    if previous is not None and previous.kind is not RobotsKind.DISALLOW_ALL and previous.is_fresh(now_s):
        # A cached answer is still within its lifetime: keep it (RFC 9309 §2.4), retry in the background.
        return RobotsEntry(
            kind=previous.kind,
            robots_text=previous.robots_text,
            expires_at_s=previous.expires_at_s,
            permissive_fallback=previous.permissive_fallback,
            **common,
        )
    if config.allow_on_5xx:
        # The permissive choice: never stall the crawl; the caller logs it.
        if last_good_text is not None:
            return RobotsEntry(
                kind=RobotsKind.RULES,
                robots_text=last_good_text,
                expires_at_s=retry_at_s,
                permissive_fallback=True,
                **common,
            )
        return RobotsEntry(
            kind=RobotsKind.ALLOW_ALL, robots_text=None, expires_at_s=retry_at_s, permissive_fallback=True, **common
        )
    if last_good_text is not None and now_s - since > config.unreachable_grace_s:
        # Unreachable for longer than the grace (30 days): the cached copy may be used (RFC 9309 §2.3.1.4).
        return RobotsEntry(kind=RobotsKind.RULES, robots_text=last_good_text, expires_at_s=retry_at_s, **common)
    return RobotsEntry(kind=RobotsKind.DISALLOW_ALL, robots_text=None, expires_at_s=retry_at_s, **common)


class RobotsCache:
    """In-process LRU of origin → (RobotsEntry, RobotsRules) in front of the robots table.

    ``max_size`` is ``http.robots.cache.lru.size`` (entries); the least
    recently used origin is dropped when it is exceeded. The durable table
    is the caller's. Not thread-safe (one per worker event loop).
    """

    def __init__(self, max_size: int, config: RobotsConfig) -> None:
        if max_size < 1:  # http.robots.cache.lru.size is checked at load (squall.settings.rules)
            raise ValueError(f"max_size must be at least 1, got {max_size}")
        self._max_size = max_size
        self._config = config
        self._items: OrderedDict[str, tuple[RobotsEntry, RobotsRules]] = OrderedDict()

    def get(self, origin: str) -> tuple[RobotsEntry, RobotsRules] | None:
        """The cached pair for ``origin`` (marked most recently used), or None."""
        item = self._items.get(origin)
        if item is not None:
            self._items.move_to_end(origin)
        return item

    def put(self, origin: str, entry: RobotsEntry) -> RobotsRules:
        """Cache ``entry`` for ``origin`` and return its rules; evicts the least recently used."""
        rules = entry.rules(self._config)
        self._items[origin] = (entry, rules)
        self._items.move_to_end(origin)
        while len(self._items) > self._max_size:
            self._items.popitem(last=False)
        return rules

    def discard(self, origin: str) -> None:
        """Forget ``origin`` (no error if unknown)."""
        self._items.pop(origin, None)

    def __contains__(self, origin: object) -> bool:
        return origin in self._items

    def __len__(self) -> int:
        return len(self._items)
