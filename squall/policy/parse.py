"""HTML parsing: outlinks, robots directives, canonical, title and charset of one page.

Pure: bytes and headers in, a frozen :class:`ParseResult` out; no I/O, never
raises on bad bytes or broken markup (lenient parser, see STYLE.md). Outlinks
are absolute but *not* canonicalized (that is :mod:`squall.policy.urls`' job).

Sources of the rules:

* base URL: HTML Living Standard §4.2.3 — the first ``<base href>``, itself
  resolved against the document URL.
* ``rel=nofollow`` on ``<a>``/``<area>``: HTML §4.6.7.12.
* meta robots and ``X-Robots-Tag``: Google's robots meta tag specification
  (``none`` = ``noindex, nofollow``; an ``X-Robots-Tag`` value may start with
  ``<agent>:`` and then applies to that agent only).
* charset: BOM, then the Content-Type header, then ``<meta charset>`` /
  http-equiv, then UTF-8 (w3lib.encoding.html_to_unicode, which also applies
  the WHATWG overrides, e.g. ``iso-8859-1`` → ``cp1252``).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import urljoin, urlsplit

from selectolax.lexbor import LexborHTMLParser, LexborNode
from w3lib.encoding import html_to_unicode

__all__ = ["ParseResult", "is_parseable", "parse_html", "robots_directives"]

# Schemes an outlink may resolve to; javascript:, mailto:, tel:, data:, ftp: ... are dropped.
_LINK_SCHEMES = frozenset({"http", "https"})
# Characters the WHATWG URL parser removes from anywhere in a URL.
_URL_STRIP_INSIDE = re.compile(r"[\t\n\r]")
# Leading/trailing ASCII whitespace and C0 controls, stripped from attribute URLs.
_URL_STRIP_EDGES = "".join(chr(c) for c in range(0x21))
_WS = re.compile(r"\s+")
# An absolute http(s) URL that resolving leaves as it is (urljoin splits and joins it again unchanged):
# lower-case scheme and host, a port, a path without ";" (urljoin's parameters) and a non-empty query
_PLAIN_ABSOLUTE = re.compile(
    r"https?://[a-z0-9_\-.]+(?::(?P<port>[0-9]{1,5}))?(?:/[A-Za-z0-9\-._~!$&()*+,=:@/]*)?"
    r"(?:\?[A-Za-z0-9\-._~!$&()*+,;=:@/?]+)?"
)
# Directive names of the robots meta tag / X-Robots-Tag (Google's list), used to
# tell "googlebot: noindex" (agent prefix) from "unavailable_after: <date>".
_KNOWN_DIRECTIVES = frozenset(
    {
        "all",
        "noindex",
        "nofollow",
        "none",
        "noarchive",
        "nocache",
        "nosnippet",
        "notranslate",
        "noimageindex",
        "unavailable_after",
        "max-snippet",
        "max-image-preview",
        "max-video-preview",
        "indexifembedded",
        "noodp",
        "noydir",
        "index",
        "follow",
    }
)
# Elements whose text is not visible page text.
_INVISIBLE = ("script", "style", "noscript", "template")

Headers = Mapping[str, str] | Iterable[tuple[str, str]]


@dataclass(frozen=True)
class ParseResult:
    """What squall keeps from one parsed HTML page.

    ``outlinks``: absolute http(s) URLs in document order, without duplicates,
    empty when ``nofollow``. ``canonical``: absolute ``<link rel=canonical>``
    target or None when absent/unusable. ``title``: whitespace-collapsed
    ``<title>`` text, None when absent or empty. ``charset``: the Python codec
    name the body was decoded with. ``text_length``: characters of
    whitespace-collapsed visible text (no script/style).
    """

    outlinks: tuple[str, ...] = ()
    nofollow: bool = False
    noindex: bool = False
    canonical: str | None = None
    title: str | None = None
    charset: str = "utf-8"
    text_length: int = 0


def is_parseable(content_type: str | None, mimetypes: Sequence[str]) -> bool:
    """True when a Content-Type header value names one of ``mimetypes``.

    Parameters are ignored (``text/html; charset=utf-8`` is ``text/html``);
    comparison is case-insensitive; an entry ``type/*`` or ``*/*`` is a
    wildcard (config key ``parser.mimetypes``). A missing or empty header is
    not parseable: squall does not sniff content (RFC 9110 §8.3 allows, but
    does not require, it).
    """
    if not content_type:
        return False
    mime = content_type.split(";", 1)[0].strip().lower()
    if "/" not in mime:
        return False
    major = mime.split("/", 1)[0]
    for entry in mimetypes:
        entry = entry.strip().lower()
        if entry == mime or entry == "*/*" or entry == f"{major}/*":
            return True
    return False


def robots_directives(value: str, agent_token: str | None = None, *, header: bool = False) -> set[str]:
    """Lower-case directives of one meta robots content or X-Robots-Tag value.

    With ``header=True`` an ``<agent>:`` prefix scopes the directives after it
    (up to the next prefix) to that agent; they are kept only when the agent
    equals ``agent_token`` (case-insensitive). ``none`` expands to
    ``noindex`` and ``nofollow``. Unknown tokens are kept as they are.
    """
    token = agent_token.lower() if agent_token else None
    out: set[str] = set()
    applies = True
    for raw in value.split(","):
        part = raw.strip().lower()
        if not part:
            continue
        if header and ":" in part:
            name, _, rest = part.partition(":")
            name = name.strip()
            if name not in _KNOWN_DIRECTIVES:
                # "googlebot: noindex" — a new agent scope starts here
                applies = name == token
                part = rest.strip()
                if not part:
                    continue
            else:
                part = name  # "unavailable_after: <date>", "max-snippet:20" → directive name
        if not applies:
            continue
        for word in part.split():
            out.add(word)
    if "none" in out:
        out |= {"noindex", "nofollow"}
    return out


def parse_html(
    body: bytes,
    *,
    url: str,
    headers: Headers = (),
    content_type: str | None = None,
    agent_token: str | None = None,
    text_length: bool = True,
) -> ParseResult:
    """Parse one HTML page into a :class:`ParseResult`; never raises.

    ``headers`` are the response headers (a mapping or a list of pairs; names
    case-insensitive; every ``X-Robots-Tag`` is read). ``content_type`` is the
    Content-Type value used for the charset; None falls back to the
    Content-Type in ``headers``. ``agent_token`` (e.g. ``"squall"``) adds
    ``<meta name="squall">`` and ``squall:``-prefixed X-Robots-Tag values to the
    generic ``robots`` ones. ``text_length`` False leaves
    :attr:`ParseResult.text_length` at 0 instead of counting the visible
    text (which takes the script and style elements out of the tree first):
    only the render step's shell test reads it.
    """
    pairs = _header_pairs(headers)
    if content_type is None:
        content_type = next((v for k, v in pairs if k.lower() == "content-type"), None)
    charset, text = _decode(body, content_type)

    directives: set[str] = set()
    for name, value in pairs:
        if name.lower() == "x-robots-tag":
            directives |= robots_directives(value, agent_token, header=True)

    try:
        tree = LexborHTMLParser(text)
    except Exception:  # lexbor refuses the input: keep header-level facts only
        return _result(directives, charset=charset)

    meta_names = {"robots"} | ({agent_token.lower()} if agent_token else set())
    base = url
    base_seen = False
    canonical: str | None = None
    title: str | None = None
    links: list[str] = []
    for node in tree.css("base, a, area, link, meta, title"):
        tag = node.tag
        attrs = _attrs(node)
        if tag == "title":
            if title is None:
                title = _WS.sub(" ", node.text(deep=True) or "").strip() or None
        elif tag == "base":
            if not base_seen and attrs.get("href") is not None:
                base_seen = True  # only the first <base href> counts, even if unusable
                resolved = _resolve(url, attrs["href"])
                if resolved is not None:
                    base = resolved
        elif tag == "meta":
            if attrs.get("name", "").strip().lower() in meta_names:
                directives |= robots_directives(attrs.get("content", ""))
        elif tag == "link":
            if canonical is None and "canonical" in _rel(attrs) and attrs.get("href"):
                canonical = attrs["href"]  # resolved below, once <base> is known
        else:  # a, area
            href = attrs.get("href")
            if href is None or "nofollow" in _rel(attrs):
                continue
            links.append(href)

    outlinks = tuple(_resolve_all(base, links))
    if canonical is not None:
        canonical = _resolve(base, canonical)
    return _result(
        directives,
        charset=charset,
        outlinks=outlinks,
        canonical=canonical,
        title=title,
        text_length=_text_length(tree) if text_length else 0,
    )


def _resolve_all(base: str, hrefs: Iterable[str]) -> list[str]:
    """Resolve ``hrefs`` against ``base``, keeping the first of each absolute URL."""
    out: list[str] = []
    seen: set[str] = set()
    origin = _origin(base)
    for href in hrefs:
        if origin is not None and href[:1] == "/" and href[1:2] != "/" and href == href.strip(_URL_STRIP_EDGES):
            resolved = _resolve_rooted(origin, href)  # the same navigation links on every page of a host
        else:
            resolved = _resolve(base, href)
        if resolved is not None and resolved not in seen:
            seen.add(resolved)
            out.append(resolved)
    return out


def _result(directives: set[str], **fields: Any) -> ParseResult:
    nofollow = "nofollow" in directives
    noindex = "noindex" in directives
    if nofollow:
        fields["outlinks"] = ()
    return ParseResult(nofollow=nofollow, noindex=noindex, **fields)


def _header_pairs(headers: Headers) -> list[tuple[str, str]]:
    try:
        items = headers.items() if isinstance(headers, Mapping) else headers
        return [(str(k), str(v)) for k, v in items]
    except (TypeError, ValueError):
        return []


def _decode(body: bytes, content_type: str | None) -> tuple[str, str]:
    """(codec name, text): BOM, header charset, meta charset, else UTF-8; bad bytes replaced."""
    try:
        charset, text = html_to_unicode(content_type, bytes(body))
        charset = codecs.lookup(charset).name  # "utf8" → "utf-8", "latin-1" → "iso8859-1"
    except Exception:  # w3lib is lenient, but a hostile header must not kill the parser
        charset, text = "utf-8", bytes(body).decode("utf-8", "replace")
    # lexbor takes C strings: NUL would cut the document short. Dropped, not replaced by U+FFFD:
    # a body of NULs would otherwise cost lexbor ~17x its size (HTML ignores NUL in text anyway)
    return charset, text.replace("\x00", "")


def _attrs(node: LexborNode) -> dict[str, str]:
    """Attributes with lower-case names; a valueless attribute is the empty string."""
    try:
        return {str(k).lower(): (v or "") for k, v in node.attributes.items()}
    except Exception:
        return {}


def _rel(attrs: Mapping[str, str]) -> set[str]:
    return set(attrs.get("rel", "").lower().split())


def _origin(base: str) -> str | None:
    """``scheme://netloc`` of an http(s) ``base`` (None for any other, or an unparsable one)."""
    try:
        parts = urlsplit(base)
    except ValueError:
        return None
    if parts.scheme.lower() not in _LINK_SCHEMES or not parts.netloc:
        return None
    return f"{parts.scheme}://{parts.netloc}"


@lru_cache(maxsize=16384)
def _resolve_rooted(origin: str, href: str) -> str | None:
    """:func:`_resolve` of a root-relative ``href`` (``/...``, not ``//...``): it depends on the base's origin only.

    RFC 3986 §5.2.2: a reference whose path starts with ``/`` keeps the
    base's scheme and authority and nothing else of it, so ``origin + "/"``
    resolves it exactly as the page URL does; memoized (bounded) because
    pages of a host repeat the same navigation links.
    """
    return _resolve(origin + "/", href)


def _resolve(base: str, href: str) -> str | None:
    """Absolute http(s) URL of ``href`` against ``base``, or None (fragment-only, other scheme, malformed)."""
    plain = _PLAIN_ABSOLUTE.fullmatch(href)
    if plain is not None and int(plain.group("port") or 0) <= 65535:
        return href  # what urljoin and the checks of _resolve_joined would give it, without them
    return _resolve_joined(base, href)


def _resolve_joined(base: str, href: str) -> str | None:
    """:func:`_resolve` by ``urljoin`` (RFC 3986 §5.2), for any ``href``."""
    href = _URL_STRIP_INSIDE.sub("", href.strip(_URL_STRIP_EDGES))
    if not href or href.startswith("#"):
        return None
    try:
        absolute = urljoin(base, href)
        parts = urlsplit(absolute)
        parts.port  # noqa: B018 — raises ValueError on a non-numeric/out-of-range port
    except ValueError:
        return None
    if parts.scheme.lower() not in _LINK_SCHEMES or not parts.netloc:
        return None
    return absolute


def _text_length(tree: LexborHTMLParser) -> int:
    try:
        root = tree.body or tree.root
        if root is None:
            return 0
        for node in root.css(", ".join(_INVISIBLE)):
            node.decompose()
        return len(_WS.sub(" ", root.text(deep=True, separator=" ")).strip())
    except Exception:
        return 0
