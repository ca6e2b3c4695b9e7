"""Headless rendering decisions: which pages to render, which browser requests may go, the page budget.

Pure: no I/O, no browser, no clock. :mod:`squall.net.render` drives Chromium and
asks this module about every request the browser makes; :mod:`agents.render`
decides per page and records the outcome. The feature: render JavaScript-only pages selectively, with a
small pool, and the browser's own requests obey squall's rules.

A page is rendered (:func:`should_render`) only when ``render.enabled`` is
true, the answer is a 2xx HTML page without ``nofollow``, and either its host
is in ``render.hosts.allow`` or — with ``render.detect.shell`` — it looks
like an empty application shell (:func:`shell_signals`): at most
``render.shell.max.links`` links and either a framework signature (an empty
``#root``/``#app``/``#__next`` mount point, ``__NEXT_DATA__``,
``window.__NUXT__``, ``<app-root>``, ``ng-version``) or a script with less
than ``render.shell.max.text`` characters of visible text.

Every request of the browser except the page's own document (served from the
raw fetch) is judged by :func:`judge_request`, in this order, the first
refusal winning: the method (GET/HEAD only), the scheme (http/https), the
resource type (``render.resources.skip``: images, media and fonts by
default), main-frame navigation away from the page, the site (the page's
own partition key — the fetch queue whose turn the render runs in — or a
host of ``render.requests.hosts.allow``), the address check of an IP-literal
host (:func:`squall.policy.netsafety.check_address`; names are judged after the one
DNS answer by :class:`squall.net.http.PolicyResolver`), robots.txt of the
request's origin (RFC 9309: it must be known and fresh in squall's cache —
an unknown one is refused rather than fetched outside the host's pace, an
unreachable one refuses as ``robots.unavailable``, a disallowing one as
``robots.denied``), and
last the budget: at most ``render.max.requests`` requests leave per page; the
next one ends the render (``render.budget``).
"""

from __future__ import annotations

import re
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from squall.errors import ConfigError, InvalidURL
from squall.policy.netsafety import NetworkPolicy, check_address
from squall.policy.parse import ParseResult
from squall.policy.partition import is_ip_literal, partition_key

if TYPE_CHECKING:
    from squall.policy.robots_rules import RobotsRules
    from squall.policy.robots_status import RobotsEntry
    from squall.settings import Settings

__all__ = [
    "REFUSED_KEY",
    "RENDER_KEY",
    "REQUESTS_KEY",
    "Refusal",
    "RenderConfig",
    "RenderFailure",
    "RenderOutcome",
    "RenderTally",
    "RobotsAnswer",
    "ShellSignals",
    "SubRequest",
    "SubresourceCache",
    "cacheable",
    "judge_request",
    "shell_signals",
    "should_render",
]

# Metadata keys recorded on a rendered page (parse.* is persisted by default: metadata.persist).
RENDER_KEY = "parse.render"  # ["rendered"] or ["failed", <RenderFailure value>]
REFUSED_KEY = "parse.render.refused"  # ["<Refusal value>=<count>", ...]
REQUESTS_KEY = "parse.render.requests"  # [<browser requests that were sent>]

_METHODS = frozenset({"GET", "HEAD"})
_SCHEMES = frozenset({"http", "https"})
# Resource types Playwright reports (Request.resource_type); the skip list must name some of these.
RESOURCE_TYPES = frozenset(
    {
        "document",
        "stylesheet",
        "image",
        "media",
        "font",
        "script",
        "texttrack",
        "xhr",
        "fetch",
        "eventsource",
        "websocket",
        "manifest",
        "other",
    }
)
# Framework signatures of a client-rendered shell ("<div id="root"></div>, __NEXT_DATA__, etc.").
_EMPTY_MOUNT = re.compile(
    rb"""<(?:div|main|section|app-root)\b[^>]*\bid\s*=\s*["']?(root|app|__next|__nuxt|q-app|svelte)\b["']?[^>]*>\s*</""",
    re.IGNORECASE,
)
_SIGNATURES = (
    (re.compile(rb"__NEXT_DATA__"), "next"),
    (re.compile(rb"window\.__NUXT__"), "nuxt"),
    (re.compile(rb"<app-root\b", re.IGNORECASE), "angular"),
    (re.compile(rb"\bng-version\s*=", re.IGNORECASE), "angular"),
)
_SCRIPT = re.compile(rb"<script\b", re.IGNORECASE)


class Refusal(str, Enum):
    """Why a browser request was not sent (counted per page in ``parse.render.refused``)."""

    METHOD = "method"  # not GET/HEAD (a script's POST): squall only reads
    SCHEME = "scheme"  # not http(s): data:, blob: are local; others are refused
    RESOURCE_TYPE = "resource_type"  # render.resources.skip (images, media, fonts by default)
    NAVIGATION = "navigation"  # the page's script navigates the main frame elsewhere
    OTHER_SITE = "other_site"  # not the page's own site nor render.requests.hosts.allow
    BLOCKED_ADDRESS = "blocked_address"  # the SSRF guard (squall.policy.netsafety), before any packet
    ROBOTS_DENIED = "robots.denied"  # robots.txt of the request's origin disallows it (only that)
    ROBOTS_UNAVAILABLE = "robots.unavailable"  # robots.txt of the origin unreachable: complete disallow (§2.3.1.4)
    ROBOTS_UNKNOWN = "robots.unknown"  # robots.txt of the origin not known (fresh) to squall
    BUDGET = "budget"  # render.max.requests already sent: the render ends
    WEBSOCKET = "websocket"  # WebSockets are never connected
    FAILED = "failed"  # allowed, but the fetch failed (timeout, connection, ...)


class RenderFailure(str, Enum):
    """Why a render ended without a DOM: the page keeps its raw HTML's links."""

    TIMEOUT = "render.timeout"  # render.timeout passed before the page settled
    CRASH = "render.crash"  # the browser or the page crashed; the pool restarts it
    BUDGET = "render.budget"  # the page asked for more than render.max.requests
    UNAVAILABLE = "render.unavailable"  # the browser could not be started
    ERROR = "render.error"  # any other browser error


class RobotsAnswer(str, Enum):
    """What squall's robots cache says about one URL."""

    ALLOWED = "allowed"
    DENIED = "denied"  # the rules disallow the URL
    UNAVAILABLE = "unavailable"  # robots.txt unreachable: nothing of the origin may be fetched (RFC 9309 §2.3.1.4)
    UNKNOWN = "unknown"


def robots_answer(known: tuple[RobotsEntry, RobotsRules] | None, url: str, now_s: float) -> RobotsAnswer:
    """What the cached robots.txt of ``url``'s origin (``known``: entry and rules, or None) says of ``url``.

    A browser request is never the one that fetches robots.txt: unknown or
    stale is UNKNOWN (refused, so nothing is fetched outside the host's
    pace); unreachable is UNAVAILABLE (RFC 9309 §2.3.1.4: nothing of the
    origin may be fetched).
    """
    if known is None:
        return RobotsAnswer.UNKNOWN
    entry, rules = known
    if entry.blocks_origin:
        return RobotsAnswer.UNAVAILABLE
    if not entry.is_fresh(now_s):
        return RobotsAnswer.UNKNOWN
    return RobotsAnswer.ALLOWED if rules.allowed(url) else RobotsAnswer.DENIED


@dataclass(frozen=True)
class RenderConfig:
    """The ``render.*`` keys; durations in seconds, sizes in characters.

    ``hosts_allow``: hosts always rendered (lower case). ``request_hosts_allow``:
    hosts besides the page's own site the browser may request. ``skip_types``:
    Playwright resource types refused. ``browser_path``: "" = find Chromium on PATH.
    ``cache_bytes`` / ``cache_ttl_s``: the worker's cache of scripts and
    stylesheets shared by renders (0 = off).
    """

    enabled: bool
    hosts_allow: frozenset[str]
    detect_shell: bool
    shell_max_links: int
    shell_max_text: int
    timeout_s: float
    idle_s: float
    max_requests: int
    pool_size: int
    skip_types: frozenset[str]
    request_hosts_allow: frozenset[str]
    browser_path: str
    cache_bytes: int
    cache_ttl_s: float

    @classmethod
    def from_settings(cls, settings: Settings) -> RenderConfig:
        """Copy the ``render.*`` keys (checked by :mod:`squall.settings.rules`)."""
        return cls(
            enabled=settings.render_enabled,
            hosts_allow=frozenset(h.lower().rstrip(".") for h in settings.render_hosts_allow),
            detect_shell=settings.render_detect_shell,
            shell_max_links=settings.render_shell_max_links,
            shell_max_text=settings.render_shell_max_text,
            timeout_s=settings.render_timeout,
            idle_s=settings.render_idle_secs,
            max_requests=settings.render_max_requests,
            pool_size=settings.render_pool_size,
            skip_types=frozenset(t.lower() for t in settings.render_resources_skip),
            request_hosts_allow=frozenset(h.lower().rstrip(".") for h in settings.render_requests_hosts_allow),
            browser_path=settings.render_browser_path,
            cache_bytes=settings.render_cache_size,
            cache_ttl_s=settings.render_cache_ttl_secs,
        )


@dataclass(frozen=True)
class ShellSignals:
    """What the raw HTML says about needing a browser.

    ``links``: outlinks found in the raw HTML; ``text_length``: visible
    characters; ``scripts``: ``<script`` tags; ``signature``: the framework
    signature found (``"mount:root"``, ``"next"``, ...) or None; ``nofollow``:
    meta robots / X-Robots-Tag nofollow.
    """

    links: int
    text_length: int
    scripts: int
    signature: str | None
    nofollow: bool


def shell_signals(body: bytes, parsed: ParseResult) -> ShellSignals:
    """Signals of an application shell in ``body`` (raw HTML bytes) and its parse result."""
    signature = None
    mount = _EMPTY_MOUNT.search(body)
    if mount:
        signature = "mount:" + mount.group(1).decode("ascii", "replace").lower()
    else:
        signature = next((name for pattern, name in _SIGNATURES if pattern.search(body)), None)
    return ShellSignals(
        links=len(parsed.outlinks),
        text_length=parsed.text_length,
        scripts=len(_SCRIPT.findall(body)),
        signature=signature,
        nofollow=parsed.nofollow,
    )


@dataclass(frozen=True)
class RenderDecision:
    """Whether to render a page; ``why`` names the rule that decided (for logs and tests)."""

    render: bool
    why: str


def should_render(config: RenderConfig, host: str, signals: ShellSignals) -> RenderDecision:
    """Decide whether a fetched 2xx HTML page of ``host`` is rendered (see the module docstring)."""
    if not config.enabled:
        return RenderDecision(False, "disabled")
    if signals.nofollow:
        return RenderDecision(False, "nofollow")  # its links would not be followed anyway
    if host.lower().rstrip(".") in config.hosts_allow:
        return RenderDecision(True, "render.hosts.allow")
    if not config.detect_shell:
        return RenderDecision(False, "host not listed")
    if signals.links > config.shell_max_links:
        return RenderDecision(False, "has links")
    if signals.signature is not None:
        return RenderDecision(True, f"shell {signals.signature}")
    if signals.scripts > 0 and signals.text_length < config.shell_max_text:
        return RenderDecision(True, "scripts and little text")
    return RenderDecision(False, "no shell signature")


@dataclass(frozen=True)
class SubRequest:
    """One request of the browser during a render.

    ``resource_type``: Playwright's name (``script``, ``fetch``, ``image``, ...).
    ``main_frame_navigation``: a navigation of the page's main frame (the
    page's own first document is never judged).
    """

    url: str
    method: str
    resource_type: str
    main_frame_navigation: bool = False


def judge_request(
    request: SubRequest,
    *,
    page_url: str,
    config: RenderConfig,
    mode: str,
    network: NetworkPolicy,
    robots: Callable[[str], RobotsAnswer],
    sent: int,
) -> Refusal | None:
    """None when ``request`` may be sent, else the first :class:`Refusal` (order: module docstring).

    ``mode``: ``partition.url.mode`` (the page's site is its partition key).
    ``robots``: answers for the request's URL from squall's robots cache
    (called only once the cheaper rules passed). ``sent``: requests of this
    render already sent.
    """
    if request.method.upper() not in _METHODS:
        return Refusal.METHOD
    try:
        parts = urlsplit(request.url)
        host = (parts.hostname or "").rstrip(".")
    except ValueError:
        return Refusal.SCHEME
    if parts.scheme.lower() not in _SCHEMES or not host:
        return Refusal.SCHEME
    if request.resource_type.lower() in config.skip_types:
        return Refusal.RESOURCE_TYPE
    if request.main_frame_navigation:
        return Refusal.NAVIGATION
    if not _same_site(request.url, page_url, mode) and host not in config.request_hosts_allow:
        return Refusal.OTHER_SITE
    if is_ip_literal(host) and check_address(host, network) is not None:
        return Refusal.BLOCKED_ADDRESS
    answer = robots(request.url)
    if answer is RobotsAnswer.DENIED:
        return Refusal.ROBOTS_DENIED
    if answer is RobotsAnswer.UNAVAILABLE:
        return Refusal.ROBOTS_UNAVAILABLE
    if answer is not RobotsAnswer.ALLOWED:
        return Refusal.ROBOTS_UNKNOWN
    if sent >= config.max_requests:
        return Refusal.BUDGET
    return None


def _same_site(url: str, page_url: str, mode: str) -> bool:
    try:
        return partition_key(url, mode) == partition_key(page_url, mode)
    except (InvalidURL, ConfigError):
        return False


_CACHEABLE_TYPES = frozenset({"script", "stylesheet"})
_UNCACHEABLE = re.compile(r"no-store|no-cache|private", re.IGNORECASE)


def cacheable(resource_type: str, status: int, headers: list[tuple[str, str]]) -> bool:
    """True when a fetched sub-resource may be reused by later renders of the worker.

    Only scripts and stylesheets answered 200, and not marked ``no-store``,
    ``no-cache`` or ``private`` (RFC 9111 §5.2.2) — a page's data (fetch, xhr)
    is never reused. Saves the host a request per render for the bundle every
    page of an application loads.
    """
    if resource_type.lower() not in _CACHEABLE_TYPES or status != 200:
        return False
    return not any(k.lower() in ("cache-control", "pragma") and _UNCACHEABLE.search(v) for k, v in headers)


class SubresourceCache:
    """LRU of sub-resources by URL, bounded in bytes, each entry kept ``ttl_s`` seconds (time passed in).

    Values are opaque to the cache; ``size`` of each is given by the caller.
    """

    def __init__(self, max_bytes: int, ttl_s: float) -> None:
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        self._entries: OrderedDict[str, tuple[float, int, Any]] = OrderedDict()
        self.bytes = 0

    def get(self, url: str, now_s: float) -> Any | None:
        """The value stored for ``url`` if younger than the TTL, else None (and the stale entry is dropped)."""
        entry = self._entries.get(url)
        if entry is None:
            return None
        stored_at, _, value = entry
        if now_s - stored_at >= self.ttl_s:
            self._remove(url)
            return None
        self._entries.move_to_end(url)
        return value

    def put(self, url: str, value: Any, size: int, now_s: float) -> bool:
        """Store ``value`` of ``size`` bytes; False (not stored) when it alone exceeds the bound or the cache is off."""
        if self.max_bytes <= 0 or self.ttl_s <= 0 or size > self.max_bytes:
            return False
        if url in self._entries:
            self._remove(url)
        self._entries[url] = (now_s, size, value)
        self.bytes += size
        while self.bytes > self.max_bytes:
            self._remove(next(iter(self._entries)))
        return True

    def _remove(self, url: str) -> None:
        _, size, _ = self._entries.pop(url)
        self.bytes -= size


@dataclass
class RenderTally:
    """Requests of one render: how many were sent, how many refused per reason."""

    sent: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    cached: int = 0

    def refuse(self, reason: Refusal) -> None:
        self.refused[reason.value] += 1


@dataclass(frozen=True)
class RenderOutcome:
    """The end of one render: the DOM as HTML (None on failure) and what happened.

    ``html``: ``document.documentElement.outerHTML`` after the page settled.
    ``failure``: why there is no DOM. ``sent``: browser requests that left
    (the page's own document, served from the raw fetch, not counted).
    ``refused``: reason value → count. ``elapsed_s``: seconds the render took.
    ``cached``: requests answered from the worker's sub-resource cache.
    """

    html: str | None
    failure: RenderFailure | None
    sent: int
    refused: Mapping[str, int]
    elapsed_s: float
    cached: int = 0

    def metadata(self) -> dict[str, list[str]]:
        """The ``parse.render*`` metadata of the page (see the key constants)."""
        status = ["rendered"] if self.failure is None else ["failed", self.failure.value]
        return {
            RENDER_KEY: status,
            REQUESTS_KEY: [str(self.sent)],
            REFUSED_KEY: [f"{reason}={n}" for reason, n in sorted(self.refused.items())],
        }
