"""Robots policy: robots.txt parsing, group selection, fetch-status decisions, caching and Crawl-delay.

Pure policy (no network, no Faust/aiohttp/Kafka): the fetcher hands in what
it got (:class:`RobotsFetchOutcome`) and the current time ``now_s`` (Unix
seconds); :func:`decide` returns a :class:`RobotsEntry`, a frozen,
JSON-serializable value for the robots table; :class:`RobotsRules` answers
"may this URL be fetched" and "which Crawl-delay applies".

Rule sources: RFC 9309 (robots exclusion protocol; it wins where seed 002
disagrees), seed 002 refinement 4 (caching, refresh ahead, the opt-in
permissive 5xx choice), seed 000 (Crawl-delay cap and forwarding),
StormCrawler keys ``http.robots.*`` and ``fetcher.max.crawl.delay*``.

Group selection is done here, not by Protego: Protego matches a group's
User-agent value anywhere in the agent string it is given (a group ``foo``
applies to agent ``foobot``). RFC 9309 §2.2.1 asks for a case-insensitive
match of the product token, so this module splits robots.txt into groups
itself, picks the groups whose product token equals a configured agent
(or ``*``), and hands Protego only the rule lines of those groups, under a
single ``User-agent: *`` line. Protego then only matches paths.
"""

from __future__ import annotations

import argparse
import datetime
import email.utils
import math
import re
import sys
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from protego import Protego

from squall.errors import ConfigError, MessageError

# Entry kinds (RobotsEntry.kind).
KIND_RULES = "rules"
KIND_ALLOW_ALL = "allow_all"
KIND_DISALLOW_ALL = "disallow_all"
KINDS = (KIND_RULES, KIND_ALLOW_ALL, KIND_DISALLOW_ALL)

# How an allow-all / disallow-all decision is kept as a "last good copy" text.
_ALLOW_ALL_TEXT = ""
_DISALLOW_ALL_TEXT = "User-agent: *\nDisallow: /\n"

_UTF8_BOM = b"\xef\xbb\xbf"
_PRODUCT_TOKEN = re.compile(r"[A-Za-z_-]*")
# A User-agent line in the spellings Protego also accepts ("User-agent:",
# "useragent:", "User agent:", or the value after whitespace, no colon).
_USER_AGENT_LINE = re.compile(r"(?:user-?agent|user agent)\s*(?::|\s)\s*(.*)", re.IGNORECASE)
# Site-wide lines that neither belong to a group nor end one (RFC 9309 §2.2.4).
_SITE_WIDE_LINE = re.compile(r"(?:sitemaps?|site-map|host)\s*(?::|\s)", re.IGNORECASE)
# Rule lines (RFC 9309 §2.2.2) in the spellings Protego accepts: only these end a run of User-agent lines.
_RULE_LINE = re.compile(r"(?:allow|disallow|dissallow|dissalow|disalow|diasllow|disallaw)\s*(?::|\s)", re.IGNORECASE)
_DIRECTIVE_WORD = re.compile(
    r"(?:allow|disallow|dissallow|dissalow|disalow|diasllow|disallaw|crawl-delay|crawl delay|"
    r"request-rate|request rate|visit-time|visit time)\s", re.IGNORECASE)
_MAX_AGE = re.compile(r"(?:^|[,\s])max-age\s*=\s*\"?(\d+)\"?", re.IGNORECASE)


def product_token(agent_name: str) -> str:
    """Return the product token of an agent name, lower-cased (``"FooBot/2.1"`` → ``"foobot"``).

    The token is the leading run of ASCII letters, ``_`` and ``-`` after
    leading white space; ``""`` when there is none. Rule source: RFC 9309
    §2.2.1 (product token; matched case-insensitively).
    """
    match = _PRODUCT_TOKEN.match(agent_name.strip())
    return match.group(0).lower() if match else ""


@dataclass(frozen=True)
class RobotsConfig:
    """Robots settings, durations in seconds (keys ``http.robots.*``, ``fetcher.max.crawl.delay*``).

    ``agents``: product tokens (lower case) matched against User-agent
    groups, first match wins. ``content_limit``: bytes of robots.txt parsed
    (negative = no cap). ``allow_on_403``: 401/403 means allow all (else
    disallow all). ``allow_on_5xx``: unreachable means allow all (seed 002)
    instead of complete disallow (RFC 9309 §2.3.1.4).
    """

    agents: tuple[str, ...]
    content_limit: int
    allow_on_403: bool
    allow_on_5xx: bool
    ttl_s: float
    refresh_ahead_s: float
    retry_base_s: float
    retry_max_s: float
    unreachable_grace_s: float
    max_crawl_delay_s: float
    max_crawl_delay_force: bool

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> "RobotsConfig":
        """Build the config from flat settings keys (see ``config/crawler-default.yaml``).

        ``http.robots.agents`` empty → the product token of ``http.agent.name``.

        Raises:
            ConfigError: a key is missing, an agent has no product token,
                ``http.robots.cache.ttl.secs`` is not in (0, 86400] (RFC 9309
                §2.4), a duration is negative, or the retry max is below the base.
        """
        def get(key: str) -> Any:
            try:
                return settings[key]
            except KeyError:
                raise ConfigError(key, "missing configuration key") from None

        names = list(get("http.robots.agents") or [])
        key = "http.robots.agents" if names else "http.agent.name"
        if not names:
            names = [get("http.agent.name")]
        agents: list[str] = []
        for name in names:
            token = product_token(str(name))
            if not token:
                raise ConfigError(key, f"{name!r} has no product token (letters, '_' or '-'; RFC 9309 §2.2.1)")
            if token not in agents:
                agents.append(token)
        config = cls(
            agents=tuple(agents),
            content_limit=int(get("http.robots.content.limit")),
            allow_on_403=bool(get("http.robots.403.allow")),
            allow_on_5xx=bool(get("http.robots.5xx.allow")),
            ttl_s=float(get("http.robots.cache.ttl.secs")),
            refresh_ahead_s=float(get("http.robots.refresh.ahead.secs")),
            retry_base_s=float(get("http.robots.retry.base.secs")),
            retry_max_s=float(get("http.robots.retry.max.secs")),
            unreachable_grace_s=float(get("http.robots.unreachable.grace.secs")),
            max_crawl_delay_s=float(get("fetcher.max.crawl.delay")),
            max_crawl_delay_force=bool(get("fetcher.max.crawl.delay.force")),
        )
        if not 0 < config.ttl_s <= 86400:
            raise ConfigError("http.robots.cache.ttl.secs", "must be > 0 and at most 86400 (RFC 9309 §2.4)")
        for name, value in (("http.robots.refresh.ahead.secs", config.refresh_ahead_s),
                            ("http.robots.unreachable.grace.secs", config.unreachable_grace_s),
                            ("fetcher.max.crawl.delay", config.max_crawl_delay_s)):
            if value < 0:
                raise ConfigError(name, "must not be negative")
        if config.retry_base_s <= 0:
            raise ConfigError("http.robots.retry.base.secs", "must be > 0")
        if config.retry_max_s < config.retry_base_s:
            raise ConfigError("http.robots.retry.max.secs", "must be >= http.robots.retry.base.secs")
        return config


def _select_group_lines(text: str, agents: Sequence[str]) -> tuple[str | None, list[str]]:
    """Return ``(matched, rule lines)`` of the groups that apply to the first matching agent.

    ``matched`` is the agent token, ``"*"``, or None (no group applies: allow
    all). All groups naming the matched token are merged (RFC 9309 §2.2.1);
    a User-agent value matches by its own product token, case-insensitively,
    never by prefix or substring. Lines before any User-agent line and
    site-wide lines (Sitemap, Host) are dropped.

    Group extent (RFC 9309 §2.2, Google's robotstxt and crawler-commons
    agree): a group starts at a User-agent line that follows a rule line
    (Allow/Disallow) and runs to the next such User-agent line. Other lines
    — Crawl-delay, unknown directives, blank lines, comments — neither end
    a run of User-agent lines nor end a group: in ``User-agent: a`` /
    ``Crawl-delay: 1`` / ``User-agent: b`` / ``Disallow: /x``, ``a`` and ``b``
    share one group (Crawl-delay 1, ``/x`` disallowed).
    """
    groups: list[tuple[set[str], list[str]]] = []
    in_agent_run = False
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        ua = _USER_AGENT_LINE.fullmatch(line)
        if ua:
            value = ua.group(1).strip()
            token = "*" if value == "*" else product_token(value)
            if not in_agent_run:
                groups.append((set(), []))
                in_agent_run = True
            if token:
                groups[-1][0].add(token)
            continue
        if _SITE_WIDE_LINE.match(line):
            continue
        if ":" not in line and not _DIRECTIVE_WORD.match(line):
            continue  # not a directive at all: ignored, like Protego does
        if _RULE_LINE.match(line):
            in_agent_run = False  # the next User-agent line starts a new group
        if groups:
            groups[-1][1].append(line)
    for wanted in (*agents, "*"):
        lines = [rule for names, rules in groups if wanted in names for rule in rules]
        if any(wanted in names for names, _ in groups):
            return wanted, lines
    return None, []


class RobotsRules:
    """Parsed robots.txt rules of one origin for the configured agents.

    ``kind`` is ``"rules"``, ``"allow_all"`` or ``"disallow_all"``;
    ``text`` the (capped, decoded) robots.txt a ``"rules"`` instance was
    built from, kept so rules can be serialized and rebuilt; ``matched_agent``
    the product token (or ``"*"``) of the group that applies, None if none.
    Build with :func:`parse_robots`, :meth:`from_text`, :meth:`allow_all`,
    :meth:`disallow_all`. Path matching (longest match, Allow wins a tie,
    ``*`` and ``$``, percent-encoding) is Protego's (RFC 9309 §2.2.2–2.2.3).
    """

    __slots__ = ("kind", "text", "matched_agent", "_parser", "_crawl_delay_s")

    def __init__(self, kind: str, text: str | None = None, matched_agent: str | None = None,
                 parser: Protego | None = None, crawl_delay_s: float | None = None) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown robots rules kind {kind!r}")
        self.kind = kind
        self.text = text
        self.matched_agent = matched_agent
        self._parser = parser
        self._crawl_delay_s = crawl_delay_s

    @classmethod
    def allow_all(cls) -> "RobotsRules":
        """Rules that allow every URL, no Crawl-delay (RFC 9309 §2.3.1.3: robots.txt unavailable)."""
        return cls(KIND_ALLOW_ALL)

    @classmethod
    def disallow_all(cls) -> "RobotsRules":
        """Rules that disallow every URL (RFC 9309 §2.3.1.4: robots.txt unreachable)."""
        return cls(KIND_DISALLOW_ALL)

    @classmethod
    def from_text(cls, text: str, agents: Sequence[str]) -> "RobotsRules":
        """Build rules from decoded robots.txt text for ``agents`` (product tokens, first match wins).

        Never raises on garbage: unknown lines are ignored (RFC 9309 §2.2).
        """
        matched, lines = _select_group_lines(text, [a.lower() for a in agents])
        parser = Protego.parse("User-agent: *\n" + "\n".join(lines) + "\n") if lines else None
        delay = parser.crawl_delay("*") if parser is not None else None
        return cls(KIND_RULES, text=text, matched_agent=matched, parser=parser, crawl_delay_s=delay)

    @property
    def crawl_delay_s(self) -> float | None:
        """Crawl-delay (seconds) of the group that applies; None if it sets none (seed 000)."""
        return self._crawl_delay_s

    def allowed(self, url: str) -> bool:
        """True if ``url`` (absolute, or a path) may be fetched under these rules (RFC 9309 §2.2.2)."""
        if self.kind == KIND_ALLOW_ALL:
            return True
        if self.kind == KIND_DISALLOW_ALL:
            return False
        if self._parser is None:
            return True  # no group applies, or an empty one
        return self._parser.can_fetch(url, "*")

    def __repr__(self) -> str:
        return f"RobotsRules(kind={self.kind!r}, matched_agent={self.matched_agent!r}, crawl_delay_s={self._crawl_delay_s!r})"


def is_truncated(body: bytes, content_limit: int) -> bool:
    """True when ``body`` is longer than ``content_limit`` bytes (negative = no cap): :func:`decode_robots` cuts it."""
    return 0 <= content_limit < len(body)


def decode_robots(body: bytes, content_limit: int) -> str:
    """Cap, strip a UTF-8 BOM and decode a robots.txt body; never raises.

    ``content_limit`` is in bytes (negative = no cap; RFC 9309 §2.5 asks for
    at least 500 KiB). A body longer than the cap is cut at the cap and its
    last, incomplete line dropped, so that ``Disallow: /admin`` cut to
    ``Disallow: /`` cannot block a whole site. Bad UTF-8 becomes U+FFFD.
    """
    if 0 <= content_limit < len(body):
        body = body[:content_limit]
        cut = max(body.rfind(b"\n"), body.rfind(b"\r"))
        body = body[:cut + 1] if cut >= 0 else b""
    if body.startswith(_UTF8_BOM):
        body = body[len(_UTF8_BOM):]
    return body.decode("utf-8", errors="replace")


def parse_robots(body: bytes, config: RobotsConfig) -> RobotsRules:
    """Parse a robots.txt body for ``config.agents``, capped at ``config.content_limit`` bytes.

    Never raises on garbage or binary input (RFC 9309 §2.2: unparseable lines
    are ignored). See :func:`decode_robots` for the cap and decoding.
    """
    return RobotsRules.from_text(decode_robots(body, config.content_limit), config.agents)


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

    ``kind``: ``"rules"`` (``robots_text`` holds the capped text),
    ``"allow_all"`` or ``"disallow_all"``. ``expires_at_s``: the entry may be
    used until then (RFC 9309 §2.4: at most ``ttl_s`` after the fetch; for
    an unreachable robots.txt, until the retry). ``unreachable_since_s``:
    first of the current run of failures (None when the last fetch got an
    answer); ``failures`` counts them; ``retry_at_s``: when to fetch again
    after a failure. ``last_good_text`` / ``last_good_at_s``: the last
    answered robots.txt (``""`` = allow all), used after
    ``unreachable_grace_s`` (RFC 9309 §2.3.1.4). ``permissive_fallback``:
    the seed 002 opt-in ``http.robots.5xx.allow`` was applied (log it).
    ``http_status``: status of the last fetch, None for a transport failure.
    ``truncated``: the last good copy was cut at ``http.robots.content.limit``
    (or by the fetcher's ``http.content.limit``): log it, ``squall status``
    counts it. ``etag`` / ``last_modified``: validators of the last good copy
    (RFC 9110 §8.8), sent on the next fetch (:func:`conditional_headers`);
    only kept from an answer without redirects.
    """

    kind: str
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
    _rules_cache: dict = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown robots entry kind {self.kind!r}")
        if self.kind == KIND_RULES and self.robots_text is None:
            raise ValueError("a 'rules' robots entry needs robots_text")

    def rules(self, config: RobotsConfig) -> RobotsRules:
        """The rules of this entry for ``config.agents`` (built once per agent list)."""
        cached = self._rules_cache.get(config.agents)
        if cached is None:
            if self.kind == KIND_ALLOW_ALL:
                cached = RobotsRules.allow_all()
            elif self.kind == KIND_DISALLOW_ALL:
                cached = RobotsRules.disallow_all()
            else:
                cached = RobotsRules.from_text(self.robots_text or "", config.agents)
            self._rules_cache[config.agents] = cached
        return cached

    def is_fresh(self, now_s: float) -> bool:
        """True while the entry may be used without fetching robots.txt first (``now_s`` < ``expires_at_s``)."""
        return now_s < self.expires_at_s

    def needs_refresh(self, now_s: float, config: RobotsConfig) -> bool:
        """True when a background fetch of robots.txt is due (seed 002: refresh before expiry).

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
        does not block: its URLs end as ``robots.denied``.
        """
        return self.kind == KIND_DISALLOW_ALL and self.unreachable_since_s is not None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable dict of the stored fields."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.init}

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> "RobotsEntry":
        """Rebuild an entry from :meth:`to_dict` output.

        Raises:
            MessageError: not a mapping, a missing or unknown kind, or fields of the wrong type.
        """
        if not isinstance(obj, Mapping):
            raise MessageError("robots entry must be an object")
        try:
            return cls(
                kind=str(obj["kind"]),
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
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
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
    return min(config.retry_base_s * (2.0 ** exponent), config.retry_max_s)


def decide(outcome: RobotsFetchOutcome, previous: RobotsEntry | None, now_s: float,
           config: RobotsConfig) -> RobotsEntry:
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
      there is one; ``allow_on_5xx`` (seed 002) uses the last good copy or
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
            return RobotsEntry(kind=KIND_RULES, robots_text=text, fetched_at_s=now_s, expires_at_s=expires_at_s,
                               last_good_text=text, last_good_at_s=now_s, http_status=status,
                               truncated=previous.truncated,
                               etag=_header(outcome.headers, "etag") or previous.etag,
                               last_modified=_header(outcome.headers, "last-modified") or previous.last_modified)
        truncated = False
        if 200 <= status < 300:
            text = decode_robots(outcome.body, config.content_limit)
            kind, robots_text, good = KIND_RULES, text, text
            truncated = outcome.truncated or is_truncated(outcome.body, config.content_limit)
            if outcome.redirects == 0:   # validators of a redirect target do not name this URL's copy
                validators = {"etag": _header(outcome.headers, "etag"),
                              "last_modified": _header(outcome.headers, "last-modified")}
        elif status in (401, 403) and not config.allow_on_403:
            kind, robots_text, good = KIND_DISALLOW_ALL, None, _DISALLOW_ALL_TEXT
        else:  # 3xx after the redirects the fetcher follows (or a 304 with nothing cached), and 4xx
            kind, robots_text, good = KIND_ALLOW_ALL, None, _ALLOW_ALL_TEXT
        return RobotsEntry(kind=kind, robots_text=robots_text, fetched_at_s=now_s, expires_at_s=expires_at_s,
                           last_good_text=good, last_good_at_s=now_s, http_status=status, truncated=truncated,
                           **validators)

    # Unreachable (RFC 9309 §2.3.1.4).
    failing = previous is not None and previous.unreachable_since_s is not None
    failures = previous.failures + 1 if failing and previous is not None else 1
    since = previous.unreachable_since_s if failing and previous is not None else now_s
    assert since is not None
    retry_at_s = now_s + _retry_delay_s(failures, config)
    last_good_text = previous.last_good_text if previous is not None else None
    last_good_at_s = previous.last_good_at_s if previous is not None else None
    common = dict(fetched_at_s=now_s, unreachable_since_s=since, failures=failures, retry_at_s=retry_at_s,
                  last_good_text=last_good_text, last_good_at_s=last_good_at_s, http_status=status,
                  truncated=previous.truncated if previous is not None else False,
                  etag=previous.etag if previous is not None else None,
                  last_modified=previous.last_modified if previous is not None else None)

    if previous is not None and previous.kind != KIND_DISALLOW_ALL and previous.is_fresh(now_s):
        # A cached answer is still within its lifetime: keep it (RFC 9309 §2.4), retry in the background.
        return RobotsEntry(kind=previous.kind, robots_text=previous.robots_text,
                           expires_at_s=previous.expires_at_s, permissive_fallback=previous.permissive_fallback,
                           **common)
    if config.allow_on_5xx:
        # Seed 002's permissive choice: never stall the crawl; the caller logs it.
        if last_good_text is not None:
            return RobotsEntry(kind=KIND_RULES, robots_text=last_good_text, expires_at_s=retry_at_s,
                               permissive_fallback=True, **common)
        return RobotsEntry(kind=KIND_ALLOW_ALL, robots_text=None, expires_at_s=retry_at_s,
                           permissive_fallback=True, **common)
    if last_good_text is not None and now_s - since > config.unreachable_grace_s:
        # Unreachable for longer than the grace (30 days): the cached copy may be used (RFC 9309 §2.3.1.4).
        return RobotsEntry(kind=KIND_RULES, robots_text=last_good_text, expires_at_s=retry_at_s, **common)
    return RobotsEntry(kind=KIND_DISALLOW_ALL, robots_text=None, expires_at_s=retry_at_s, **common)


@dataclass(frozen=True)
class CrawlDelayDecision:
    """What the fetcher does with a robots Crawl-delay (seconds; seed 000).

    ``delay_s``: the delay applied between fetches of the host (None: no
    robots delay, or ``too_long``). ``too_long``: the delay exceeds
    ``fetcher.max.crawl.delay`` and ``fetcher.max.crawl.delay.force`` is
    false: the host's URLs end as ERROR ``crawl_delay.too_long``.
    ``forward_s``: only when the delay was capped under force, the requested
    delay rounded up to whole seconds, sent as metadata ``robots.crawl.delay``.
    """

    delay_s: float | None
    too_long: bool = False
    forward_s: int | None = None


def effective_crawl_delay(rules_delay_s: float | None, config: RobotsConfig) -> CrawlDelayDecision:
    """Apply ``fetcher.max.crawl.delay`` / ``.force`` to a robots Crawl-delay (seconds; seed 000).

    Delays up to the cap (inclusive) are honoured as is, fractions too (0.5 s).
    """
    if rules_delay_s is None:
        return CrawlDelayDecision(delay_s=None)
    if rules_delay_s <= config.max_crawl_delay_s:
        return CrawlDelayDecision(delay_s=rules_delay_s)
    if not config.max_crawl_delay_force:
        return CrawlDelayDecision(delay_s=None, too_long=True)
    # Capped: fetch at the cap, forward what the site asked for (whole seconds, never less than asked).
    return CrawlDelayDecision(delay_s=config.max_crawl_delay_s, forward_s=math.ceil(rules_delay_s))


class RobotsCache:
    """In-process LRU of origin → (RobotsEntry, RobotsRules) in front of the robots table (seed 002).

    ``max_size`` is ``http.robots.cache.lru.size`` (entries); the least
    recently used origin is dropped when it is exceeded. The durable table
    is the caller's. Not thread-safe (one per worker event loop).
    """

    def __init__(self, max_size: int, config: RobotsConfig) -> None:
        if max_size < 1:
            raise ConfigError("http.robots.cache.lru.size", "must be at least 1")
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


# ---------------------------------------------------------------- command line

def _agent_token(value: str) -> str:
    token = product_token(value)
    if not token:
        raise argparse.ArgumentTypeError(f"{value!r} has no product token (letters, '_' or '-')")
    return token


def _format_delay(delay_s: float | None) -> str:
    return "none" if delay_s is None else f"{delay_s:g}"


def _check_command(args: argparse.Namespace) -> int:
    """``squall robots check``: print the verdict for each URL; 0, or 2 if the file cannot be read."""
    try:
        with open(args.robots, "rb") as handle:
            body = handle.read()
    except OSError as exc:
        print(f"squall: cannot read {args.robots}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    rules = RobotsRules.from_text(decode_robots(body, args.content_limit), [args.agent])
    if is_truncated(body, args.content_limit):
        print(f"truncated: {len(body)} bytes, only the first {args.content_limit} parsed (--content-limit)")
    print(f"group: {rules.matched_agent or 'none (no group applies: everything allowed)'}")
    delay = _format_delay(rules.crawl_delay_s)
    for url in args.urls:
        verdict = "allowed" if rules.allowed(url) else "disallowed"
        print(f"{verdict} {url} crawl-delay={delay}")
    return 0


def add_parser(subparsers: Any) -> None:
    """Register ``squall robots check --robots FILE --agent NAME URL...`` (offline check of a file)."""
    robots = subparsers.add_parser("robots", help="robots.txt tools (RFC 9309)")
    commands = robots.add_subparsers(dest="robots_command", required=True)
    check = commands.add_parser(
        "check", help="check URLs against a robots.txt file",
        description="Print the group that applies to the agent's product token ('group: <token>|*|none'), "
                    "a 'truncated:' line when the file is over --content-limit, then "
                    "'allowed|disallowed URL crawl-delay=X|none' per URL. Reads only the file.")
    check.add_argument("--robots", required=True, metavar="FILE", help="robots.txt file to read")
    check.add_argument("--agent", required=True, type=_agent_token, metavar="NAME",
                       help="agent name; its product token selects the group (RFC 9309 §2.2.1)")
    check.add_argument("--content-limit", type=int, default=-1, metavar="BYTES",
                       help="parse only this many bytes, like http.robots.content.limit (default: whole file)")
    check.add_argument("urls", nargs="+", metavar="URL")
    check.set_defaults(func=_check_command)
