"""robots.txt rules: group selection, allow/disallow matching and Crawl-delay (RFC 9309 §2.2).

Pure policy. :func:`parse_robots` turns a fetched body into
:class:`RobotsRules` ("may this URL be fetched", "which Crawl-delay
applies"); :func:`effective_crawl_delay` applies ``fetcher.max.crawl.delay``
(StormCrawler's CrawlDelayPolicy). What to do with a robots.txt *fetch* (status codes, cache
lifetime, unreachable hosts) is :mod:`squall.policy.robots_status`.

Group selection is done here, not by Protego: Protego matches a group's
User-agent value anywhere in the agent string it is given (a group ``foo``
applies to agent ``foobot``). RFC 9309 §2.2.1 asks for a case-insensitive
match of the product token, so this module splits robots.txt into groups
itself, picks the groups whose product token equals a configured agent
(or ``*``), and hands Protego only the rule lines of those groups, under a
single ``User-agent: *`` line. Protego then only matches paths.

Crawl-delay is read here too, per agent: a Crawl-delay line belongs to the
agents named on the User-agent lines directly above it (crawler-commons'
SimpleRobotRulesParser reading), while the group extent of the rules stays
RFC 9309's (see :func:`_parse_groups`).
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

from protego import Protego

if TYPE_CHECKING:
    from squall.settings import Settings


class RobotsKind(str, Enum):
    """What a robots decision is (``RobotsRules.kind``, ``RobotsEntry.kind``; the robots table holds the value)."""

    RULES = "rules"  # a parsed robots.txt text
    ALLOW_ALL = "allow_all"  # everything allowed (no robots.txt, 4xx: RFC 9309 §2.3.1.3)
    DISALLOW_ALL = "disallow_all"  # everything disallowed (unreachable §2.3.1.4, or 401/403 when so configured)


_UTF8_BOM = b"\xef\xbb\xbf"
_PRODUCT_TOKEN = re.compile(r"[A-Za-z_-]*")
# A User-agent line in the spellings Protego also accepts ("User-agent:",
# "useragent:", "User agent:", or the value after whitespace, no colon).
_USER_AGENT_LINE = re.compile(r"(?:user-?agent|user agent)\s*(?::|\s)\s*(.*)", re.IGNORECASE)
# Site-wide lines that neither belong to a group nor end one (RFC 9309 §2.2.4).
_SITE_WIDE_LINE = re.compile(r"(?:sitemaps?|site-map|host)\s*(?::|\s)", re.IGNORECASE)
# Rule lines (RFC 9309 §2.2.2) in the spellings Protego accepts: only these end a run of User-agent lines.
_RULE_LINE = re.compile(r"(?:allow|disallow|dissallow|dissalow|disalow|diasllow|disallaw)\s*(?::|\s)", re.IGNORECASE)
_CRAWL_DELAY_LINE = re.compile(r"crawl[- ]delay\s*(?::|\s)\s*(.*)", re.IGNORECASE)
_DIRECTIVE_WORD = re.compile(
    r"(?:allow|disallow|dissallow|dissalow|disalow|diasllow|disallaw|crawl-delay|crawl delay|"
    r"request-rate|request rate|visit-time|visit time)\s",
    re.IGNORECASE,
)


# A robots.txt served as an HTML page (crawler-commons SimpleRobotRulesParser strips the markup of a
# robots.txt that has <html>, <head> or <body>; a <br> ends a line there as a line break does).
_HTML_MARKUP = re.compile(r"<(?:html|head|body|br)\b[^>]*>", re.IGNORECASE)
_HTML_LINE_BREAK = re.compile(r"<br\b[^>]*>", re.IGNORECASE)
_HTML_TAG = re.compile(r"<[^>]*>")


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
    disallow all). ``allow_on_5xx``: unreachable means allow all
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
    def from_settings(cls, settings: Settings) -> RobotsConfig:
        """Copy the robots keys of ``settings`` (checked by :mod:`squall.settings.rules`).

        ``http.robots.agents`` empty → the product token of ``http.agent.name``;
        the agents are product tokens, lower-cased, each once.
        """
        agents: list[str] = []
        for name in settings.http_robots_agents or (settings.http_agent_name,):
            token = product_token(name)
            if token not in agents:
                agents.append(token)
        return cls(
            agents=tuple(agents),
            content_limit=settings.http_robots_content_limit,
            allow_on_403=settings.http_robots_403_allow,
            allow_on_5xx=settings.http_robots_5xx_allow,
            ttl_s=float(settings.http_robots_cache_ttl_secs),
            refresh_ahead_s=float(settings.http_robots_refresh_ahead_secs),
            retry_base_s=settings.http_robots_retry_base_secs,
            retry_max_s=settings.http_robots_retry_max_secs,
            unreachable_grace_s=float(settings.http_robots_unreachable_grace_secs),
            max_crawl_delay_s=settings.fetcher_max_crawl_delay,
            max_crawl_delay_force=settings.fetcher_max_crawl_delay_force,
        )


class CrawlDelaySource(str, Enum):
    """Which reading gave the Crawl-delay of the agent (``RobotsRules.crawl_delay_source``)."""

    AGENT = "agent"  # a Crawl-delay under User-agent lines that name the agent
    GROUP = "group"  # none names it: the largest Crawl-delay of a group it is in (RFC 9309 group extent)


@dataclass
class _Group:
    """One group of robots.txt as RFC 9309 §2.2 delimits it.

    ``agents``: the product tokens (or ``"*"``) of its User-agent lines;
    ``lines``: its other lines (rules, Crawl-delay, unknown directives);
    ``delays``: each valid Crawl-delay (seconds) with the tokens of the
    User-agent lines directly above it.
    """

    agents: set[str] = field(default_factory=set)
    lines: list[str] = field(default_factory=list)
    delays: list[tuple[frozenset[str], float]] = field(default_factory=list)

    def crawl_delay_for(self, token: str) -> tuple[float, CrawlDelaySource] | None:
        """The largest Crawl-delay of this group that could be meant for ``token``; None if it has none.

        The Crawl-delays under User-agent lines naming ``token`` when there
        are any; else every Crawl-delay of the group, since RFC 9309's group
        extent puts them all in the one group ``token`` is in. The largest
        wins: the politer reading.
        """
        own = [delay_s for agents, delay_s in self.delays if token in agents]
        if own:
            return max(own), CrawlDelaySource.AGENT
        if self.delays:
            return max(delay_s for _, delay_s in self.delays), CrawlDelaySource.GROUP
        return None


def robots_lines(text: str) -> list[str]:
    """The lines of robots.txt ``text``, comments and outer white space removed, empty lines left out.

    A robots.txt served as an HTML page (an ``<html>``, ``<head>``,
    ``<body>`` or ``<br>`` tag in it, as misconfigured servers send) is read
    as crawler-commons' SimpleRobotRulesParser reads it: every ``<br>`` ends
    a line, the other tags are removed and character references decoded.
    """
    if _HTML_MARKUP.search(text):
        text = _HTML_LINE_BREAK.sub("\n", text)
        raw_lines = [html.unescape(_HTML_TAG.sub("", raw)) for raw in text.splitlines()]
    else:
        raw_lines = text.splitlines()
    lines = (raw.split("#", 1)[0].strip() for raw in raw_lines)
    return [line for line in lines if line]


def _crawl_delay_value(value: str) -> float | None:
    """Seconds of a Crawl-delay value (``"2"``, ``"0.5"``); None when it is not a finite number >= 0."""
    try:
        delay_s = float(value.strip())
    except ValueError:
        return None
    return delay_s if math.isfinite(delay_s) and delay_s >= 0 else None


def _parse_groups(text: str) -> list[_Group]:
    """Split robots.txt ``text`` into its groups (RFC 9309 §2.2), each Crawl-delay kept with its agents.

    A User-agent value matches by its own product token, case-insensitively
    (RFC 9309 §2.2.1). Lines before any User-agent line and site-wide lines
    (Sitemap, Host) are dropped; lines that are not directives are ignored.

    Group extent (RFC 9309 §2.2, Google's robotstxt and crawler-commons
    agree): a group starts at a User-agent line that follows a rule line
    (Allow/Disallow) and runs to the next such User-agent line. Other lines
    — Crawl-delay, unknown directives, blank lines, comments — neither end
    a run of User-agent lines nor end a group: in ``User-agent: a`` /
    ``Crawl-delay: 1`` / ``User-agent: b`` / ``Disallow: /x``, ``a`` and ``b``
    share one group and ``/x`` is disallowed for both.

    A Crawl-delay belongs to the agents of the User-agent lines directly
    above it: the run of User-agent lines that a Crawl-delay or a rule line
    ends (crawler-commons' SimpleRobotRulesParser). In the example above the
    Crawl-delay 1 is ``a``'s; ``b`` has none of its own.
    """
    groups: list[_Group] = []
    in_group_run = False  # in a run of User-agent lines that share a group (only a rule line ends it)
    delay_agents: set[str] = set()  # the User-agent lines directly above the next Crawl-delay
    in_delay_run = False  # in a run of User-agent lines (a rule line or a Crawl-delay ends it)
    for line in robots_lines(text):
        ua = _USER_AGENT_LINE.fullmatch(line)
        if ua:
            value = ua.group(1).strip()
            token = "*" if value == "*" else product_token(value)
            if not in_group_run:
                groups.append(_Group())
                in_group_run = True
            if not in_delay_run:
                delay_agents = set()
                in_delay_run = True
            if token:
                groups[-1].agents.add(token)
                delay_agents.add(token)
            continue
        if _SITE_WIDE_LINE.match(line):
            continue
        if ":" not in line and not _DIRECTIVE_WORD.match(line):
            continue  # not a directive at all: ignored, like Protego does
        if _RULE_LINE.match(line):
            in_group_run = in_delay_run = False  # the next User-agent line starts a new group
        crawl_delay = _CRAWL_DELAY_LINE.fullmatch(line)
        if crawl_delay:
            in_delay_run = False  # the next User-agent line names other agents' Crawl-delay
        if not groups:
            continue
        groups[-1].lines.append(line)
        delay_s = _crawl_delay_value(crawl_delay.group(1)) if crawl_delay else None
        if delay_s is not None:
            groups[-1].delays.append((frozenset(delay_agents), delay_s))
    return groups


@dataclass(frozen=True)
class _Selection:
    """What applies to the configured agents: the matched token, its rule lines and its Crawl-delay."""

    matched: str | None = None  # an agent token, "*", or None: no group applies (allow all)
    lines: tuple[str, ...] = ()
    crawl_delay_s: float | None = None
    crawl_delay_source: CrawlDelaySource | None = None


def _select(text: str, agents: Sequence[str]) -> _Selection:
    """The groups that apply to the first of ``agents`` (then ``*``) that robots.txt ``text`` names.

    All groups naming the matched token are merged (RFC 9309 §2.2.1), rule
    lines in order. Its Crawl-delay is the largest that any of those groups
    could mean for it (:meth:`_Group.crawl_delay_for`).
    """
    groups = _parse_groups(text)
    for wanted in (*agents, "*"):
        mine = [group for group in groups if wanted in group.agents]
        if not mine:
            continue
        lines = tuple(line for group in mine for line in group.lines)
        delays = [found for group in mine if (found := group.crawl_delay_for(wanted)) is not None]
        if not delays:
            return _Selection(wanted, lines)
        delay_s, source = max(delays, key=lambda found: found[0])
        return _Selection(wanted, lines, delay_s, source)
    return _Selection()


class RobotsRules:
    """Parsed robots.txt rules of one origin for the configured agents.

    ``kind`` is ``"rules"``, ``"allow_all"`` or ``"disallow_all"``;
    ``text`` the (capped, decoded) robots.txt a ``"rules"`` instance was
    built from, kept so rules can be serialized and rebuilt; ``matched_agent``
    the product token (or ``"*"``) of the group that applies, None if none;
    ``crawl_delay_source`` which reading gave ``crawl_delay_s`` (None
    without one).
    Build with :func:`parse_robots`, :meth:`from_text`, :meth:`allow_all`,
    :meth:`disallow_all`. Path matching (longest match, Allow wins a tie,
    ``*`` and ``$``, percent-encoding) is Protego's (RFC 9309 §2.2.2–2.2.3).
    """

    __slots__ = ("_crawl_delay_s", "_parser", "crawl_delay_source", "kind", "matched_agent", "text")

    def __init__(
        self,
        kind: RobotsKind,
        text: str | None = None,
        matched_agent: str | None = None,
        parser: Protego | None = None,
        crawl_delay_s: float | None = None,
        crawl_delay_source: CrawlDelaySource | None = None,
    ) -> None:
        if not isinstance(kind, RobotsKind):
            raise ValueError(f"unknown robots rules kind {kind!r}")
        self.kind = kind
        self.text = text
        self.matched_agent = matched_agent
        self._parser = parser
        self._crawl_delay_s = crawl_delay_s
        self.crawl_delay_source = crawl_delay_source

    @classmethod
    def allow_all(cls) -> RobotsRules:
        """Rules that allow every URL, no Crawl-delay (RFC 9309 §2.3.1.3: robots.txt unavailable)."""
        return cls(RobotsKind.ALLOW_ALL)

    @classmethod
    def disallow_all(cls) -> RobotsRules:
        """Rules that disallow every URL (RFC 9309 §2.3.1.4: robots.txt unreachable)."""
        return cls(RobotsKind.DISALLOW_ALL)

    @classmethod
    def from_text(cls, text: str, agents: Sequence[str]) -> RobotsRules:
        """Build rules from decoded robots.txt text for ``agents`` (product tokens, first match wins).

        Never raises on garbage: unknown lines are ignored (RFC 9309 §2.2).
        """
        chosen = _select(text, [a.lower() for a in agents])
        lines = chosen.lines
        parser = Protego.parse("User-agent: *\n" + "\n".join(lines) + "\n") if lines else None
        return cls(
            RobotsKind.RULES,
            text=text,
            matched_agent=chosen.matched,
            parser=parser,
            crawl_delay_s=chosen.crawl_delay_s,
            crawl_delay_source=chosen.crawl_delay_source,
        )

    @property
    def crawl_delay_s(self) -> float | None:
        """Crawl-delay (seconds) that applies to the matched agent; None if robots.txt sets none for it.

        The largest of its own Crawl-delays (under User-agent lines naming
        it), else the largest of the group it shares (``crawl_delay_source``
        says which); see :func:`_parse_groups`.
        """
        return self._crawl_delay_s

    def allowed(self, url: str) -> bool:
        """True if ``url`` (absolute, or a path) may be fetched under these rules (RFC 9309 §2.2.2)."""
        if self.kind is RobotsKind.ALLOW_ALL:
            return True
        if self.kind is RobotsKind.DISALLOW_ALL:
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
        body = body[: cut + 1] if cut >= 0 else b""
    if body.startswith(_UTF8_BOM):
        body = body[len(_UTF8_BOM) :]
    return body.decode("utf-8", errors="replace")


def parse_robots(body: bytes, config: RobotsConfig) -> RobotsRules:
    """Parse a robots.txt body for ``config.agents``, capped at ``config.content_limit`` bytes.

    Never raises on garbage or binary input (RFC 9309 §2.2: unparseable lines
    are ignored). See :func:`decode_robots` for the cap and decoding.
    """
    return RobotsRules.from_text(decode_robots(body, config.content_limit), config.agents)


@dataclass(frozen=True)
class CrawlDelayDecision:
    """What the fetcher does with a robots Crawl-delay (seconds; StormCrawler's CrawlDelayPolicy).

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
    """Apply ``fetcher.max.crawl.delay`` / ``.force`` to a robots Crawl-delay (seconds; StormCrawler's CrawlDelayPolicy).

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
