"""robots.txt rules: group selection, allow/disallow matching and Crawl-delay (RFC 9309 §2.2).

Pure policy. :func:`parse_robots` turns a fetched body into
:class:`RobotsRules` ("may this URL be fetched", "which Crawl-delay
applies"); :func:`effective_crawl_delay` applies ``fetcher.max.crawl.delay``
(seed 000). What to do with a robots.txt *fetch* (status codes, cache
lifetime, unreachable hosts) is :mod:`squall.policy.robots_status`.

Group selection is done here, not by Protego: Protego matches a group's
User-agent value anywhere in the agent string it is given (a group ``foo``
applies to agent ``foobot``). RFC 9309 §2.2.1 asks for a case-insensitive
match of the product token, so this module splits robots.txt into groups
itself, picks the groups whose product token equals a configured agent
(or ``*``), and hands Protego only the rule lines of those groups, under a
single ``User-agent: *`` line. Protego then only matches paths.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
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
_DIRECTIVE_WORD = re.compile(
    r"(?:allow|disallow|dissallow|dissalow|disalow|diasllow|disallaw|crawl-delay|crawl delay|"
    r"request-rate|request rate|visit-time|visit time)\s",
    re.IGNORECASE,
)


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

    __slots__ = ("_crawl_delay_s", "_parser", "kind", "matched_agent", "text")

    def __init__(
        self,
        kind: RobotsKind,
        text: str | None = None,
        matched_agent: str | None = None,
        parser: Protego | None = None,
        crawl_delay_s: float | None = None,
    ) -> None:
        if not isinstance(kind, RobotsKind):
            raise ValueError(f"unknown robots rules kind {kind!r}")
        self.kind = kind
        self.text = text
        self.matched_agent = matched_agent
        self._parser = parser
        self._crawl_delay_s = crawl_delay_s

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
        matched, lines = _select_group_lines(text, [a.lower() for a in agents])
        parser = Protego.parse("User-agent: *\n" + "\n".join(lines) + "\n") if lines else None
        delay = parser.crawl_delay("*") if parser is not None else None
        return cls(RobotsKind.RULES, text=text, matched_agent=matched, parser=parser, crawl_delay_s=delay)

    @property
    def crawl_delay_s(self) -> float | None:
        """Crawl-delay (seconds) of the group that applies; None if it sets none (seed 000)."""
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
