"""Canonical URL identity: one string per crawlable resource.

``canonicalize`` turns a URL as found (absolute, or relative to a base) into
the frontier's key for it, applying, in this order:

1. whitespace stripped, relative references resolved against ``base``
   (RFC 3986 §5.2, ``urllib.parse.urljoin``);
2. the scheme must be one of ``urlfilters.schemes`` (lower-cased, RFC 3986 §6.2.2.1);
3. the authority is taken apart first (``\\`` read as ``/``, as the URL
   living standard does for special schemes): userinfo (``user:pw@``) is
   dropped — Nutch's and crawler-commons' choice for links — or, for a
   seed, refused (a credential in a seed list is an operator's mistake); a
   percent-encoded host is decoded (``example%2Ecom``, UTF-8 escapes) and
   refused if that yields a character no host may hold (URL living standard's
   forbidden host code points); a non-ASCII host is mapped by UTS 46
   (non-transitional) and encoded by IDNA 2008 (the ``idna`` package:
   ``faß.de`` → ``xn--fa-hia.de``, where IDNA 2003 gave ``fass.de``);
4. ``w3lib.url.safe_url_string`` parses the rest the way browsers do (tabs
   and newlines removed) and percent-encodes spaces and non-ASCII characters
   as UTF-8;
5. the host is lower-cased and validated (DNS name, dotted IPv4 or
   bracketed IPv6, RFC 5952 form); a trailing dot of the host is dropped;
   the scheme's default port (80, 443) is dropped, others kept (RFC 3986 §6.2.3);
6. percent-encoding normalized in path and query: a ``%`` not followed by
   two hex digits becomes ``%25`` (w3lib, crawler-commons and Safe Browsing
   agree); octets of unreserved characters decoded, every other escape kept
   with upper-case hex (RFC 3986 §6.2.2.1-2);
7. dot segments removed (RFC 3986 §5.2.4, §6.2.2.3); an empty path is ``/``;
8. query parameters named in ``urlfilters.query.remove`` dropped (a trailing
   ``*`` is a prefix wildcard, ``utm_*``); the others keep their order and
   spelling (``a`` vs ``a=``, ``+`` vs ``%20``, repeated names) unless
   ``urlnormalizer.query.sort`` sorts them; an empty query loses its ``?``;
9. the fragment is dropped;
10. the result must be at most ``urlfilters.max.length`` characters.

Deliberately *not* done (two URLs a server may tell apart stay two): no
``www.`` stripping, no trailing-slash removal, no case folding of path or
query, no decoding of reserved characters (``%2F`` stays ``%2F``). Like
StormCrawler's BasicURLNormalizer, but ``w3lib.url.canonicalize_url`` is not
used: it always sorts the query, rewrites ``a`` as ``a=`` and ``%20`` as ``+``,
and decodes reserved sub-delimiters (``%3D`` → ``=``) in the path.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import SplitResult, unquote, urljoin, urlsplit

import idna
from w3lib.url import safe_url_string

from squall.errors import InvalidURL
from squall.policy.memo import BoundedMemo
from squall.policy.reasons import Reason
from squall.policy.url_parts import PLAIN_URL_RE

if TYPE_CHECKING:
    from squall.settings import Settings

_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443, "ftp": 21}
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")  # RFC 3986 §2.3
_PERCENT_RE = re.compile(r"%([0-9A-Fa-f]{2})")
_STRAY_PERCENT_RE = re.compile(r"%(?![0-9A-Fa-f]{2})")
# URL living standard's forbidden host code points, plus "%" once escapes are decoded
_FORBIDDEN_HOST = re.compile(r"[\x00-\x20\x7f#%/:<>?@\[\\\]^|]")
_LABEL_RE = re.compile(r"[a-z0-9_\-]{1,63}")  # LDH labels, plus "_" which real hosts use
_IPV4_RE = re.compile(r"[0-9]+(?:\.[0-9]+){3}")
_TAB_OR_NEWLINE = str.maketrans("", "", "\t\n\r")
# The start of a URL whose host urlsplit would give as it is: lower case, no userinfo, no IPv6 literal
_PLAIN_AUTHORITY = re.compile(r"[a-z][a-z0-9+.\-]*://([a-z0-9_\-.]+)(?::[0-9]*)?(?=[/?#]|$)")
_MAX_HOST_LENGTH = 253  # RFC 1035 §2.3.4, without the root dot


@dataclass(frozen=True)
class NormalizerConfig:
    """How URLs are canonicalized: schemes accepted, query parameters dropped, sorting, length.

    ``schemes`` are lower-case scheme names; ``query_remove`` are parameter
    names (case-sensitive, a trailing ``*`` matches any suffix);
    ``max_length`` is in characters of the canonical URL.
    """

    schemes: tuple[str, ...]
    query_remove: tuple[str, ...]
    query_sort: bool
    max_length: int

    @classmethod
    def from_settings(cls, settings: Settings) -> NormalizerConfig:
        """Build from ``urlfilters.schemes``, ``urlfilters.query.remove``,
        ``urlnormalizer.query.sort`` and ``urlfilters.max.length``."""
        return cls(
            schemes=tuple(s.lower() for s in settings.urlfilters_schemes),
            query_remove=settings.urlfilters_query_remove,
            query_sort=settings.urlnormalizer_query_sort,
            max_length=settings.urlfilters_max_length,
        )

    def removes(self, name: str) -> bool:
        """True when the (percent-decoded) query parameter ``name`` is to be dropped."""
        for pattern in self.query_remove:
            if pattern.endswith("*"):
                if name.startswith(pattern[:-1]):
                    return True
            elif name == pattern:
                return True
        return False


def canonicalize(url: str, config: NormalizerConfig, base: str | None = None, *, seed: bool = False) -> str:
    """Return the canonical form of ``url`` (resolved against ``base`` first when given).

    The steps and their sources are listed in the module docstring. The
    result is idempotent: ``canonicalize(canonicalize(u)) == canonicalize(u)``.
    ``seed`` marks a URL an operator gave (a seed): userinfo is then refused
    instead of dropped.

    Raises:
        InvalidURL: with ``reason`` a :class:`Reason` value — ``url.malformed``
            (not a URL, relative without a base, bad port), ``url.scheme``
            (scheme not in ``config.schemes``), ``url.host`` (missing,
            unparsable or not valid IDNA 2008 host), ``url.userinfo``
            (``user:pw@`` in a seed) or ``url.too_long`` (over
            ``config.max_length``). Nothing else is raised.
    """
    if not isinstance(url, str):
        raise InvalidURL(Reason.URL_MALFORMED, repr(url))
    try:
        return _canonicalize(url, config, base, seed)
    except InvalidURL:
        raise
    except (ValueError, UnicodeError) as exc:  # port out of range, bad IPv6 brackets, IDNA failures
        raise InvalidURL(Reason.URL_MALFORMED, url) from exc


class CanonicalCache:
    """A bounded memo of :func:`canonicalize` (no base, not a seed) for one ``config``: URL as found → canonical.

    A worker canonicalizes each outlink twice, in the parse step and again in
    the status updater (which also accepts URLs from any producer), and most
    links are rediscoveries of the same few URLs. Each result is stored under
    the URL as found *and* under the canonical URL itself (canonicalization is
    idempotent), so the status updater's second call is a dict lookup.
    Failures are not cached (``InvalidURL`` is raised again each time).
    ``max_entries`` (≥ 2) bounds the memory, oldest entries first; thread-safe
    (:class:`squall.policy.memo.BoundedMemo`: the fetcher parses pages in threads).
    """

    def __init__(self, config: NormalizerConfig, max_entries: int = 65536) -> None:
        if max_entries < 2:
            raise ValueError(f"max_entries must be at least 2, got {max_entries}")
        self.config = config
        self._memo: BoundedMemo[str, str] = BoundedMemo(max_entries)

    def __len__(self) -> int:
        return len(self._memo)

    def __call__(self, url: str) -> str:
        """``canonicalize(url, self.config)``; raises :class:`InvalidURL` like it."""
        found = self._memo.get(url)
        if found is not None:
            return found
        canonical = canonicalize(url, self.config)
        self._memo.put(url, canonical)
        self._memo.put(canonical, canonical)
        return canonical


def _canonicalize(url: str, config: NormalizerConfig, base: str | None, seed: bool) -> str:
    if base is None:
        plain = _plain_canonical(url, config)
        if plain is not None:
            return plain
    return _canonicalize_fully(url, config, base, seed)


def _canonicalize_fully(url: str, config: NormalizerConfig, base: str | None, seed: bool) -> str:
    """Every step of the module doc, in order."""
    text = url.strip().translate(_TAB_OR_NEWLINE)  # URL living standard: tabs and newlines vanish
    if base is not None:
        text = urljoin(base.strip(), text)  # RFC 3986 §5.2 reference resolution
    scheme, sep, _ = text.partition(":")
    if not sep or not _SCHEME_RE.fullmatch(scheme):
        raise InvalidURL(Reason.URL_MALFORMED, url)
    scheme = scheme.lower()
    if scheme not in config.schemes:
        raise InvalidURL(Reason.URL_SCHEME, url)

    text = _clean_authority(text, url, seed)
    parts = urlsplit(safe_url_string(text))  # w3lib: browser-like parsing, UTF-8 escapes
    if "@" in parts.netloc:
        raise InvalidURL(Reason.URL_HOST, url)  # "@" decoded from the host: never reached, kept as a guard
    netloc = _netloc(parts, scheme, url)
    path = _remove_dot_segments(_normalize_escapes(parts.path or "/"))
    if not path.startswith("/"):
        raise InvalidURL(Reason.URL_MALFORMED, url)
    query = _query(parts.query, config)
    canonical = f"{scheme}://{netloc}{path}" + (f"?{query}" if query else "")
    if len(canonical) > config.max_length:
        raise InvalidURL(Reason.URL_TOO_LONG, url)
    return canonical


def _plain_canonical(url: str, config: NormalizerConfig) -> str | None:
    """The canonical form of a URL spelled plainly (:data:`PLAIN_URL_RE`), or None: the full steps decide.

    Such a URL needs none of steps 1 and 3-7 of the module doc (nothing to
    strip, resolve, decode, encode, lower-case or remove): only its default
    port, empty path, query parameters (step 8), fragment and length are
    seen to. The host is validated as step 5 does; a host the full steps
    would refuse gives None, so the refusal and its reason stay theirs. The
    two agree on every input (a property test holds them to it).
    """
    match = PLAIN_URL_RE.fullmatch(url)
    if match is None:
        return None
    scheme, host, port, path, query = match.group("scheme", "host", "port", "path", "query")
    if scheme not in config.schemes or len(host) > _MAX_HOST_LENGTH or "/." in (path or ""):
        return None
    last = host.rpartition(".")[2]
    if last.isdigit() and not _is_ipv4(host):
        return None
    if port is not None and int(port) > 65535:
        return None
    if port is not None and int(port) == _DEFAULT_PORTS.get(scheme):
        port = None
    canonical = f"{scheme}://{host}" + (f":{port}" if port else "") + (path or "/")
    query = _query(query or "", config)
    if query:
        canonical += "?" + query
    return canonical if len(canonical) <= config.max_length else None


def _is_ipv4(host: str) -> bool:
    """Whether ``host`` is a dotted IPv4 address as :func:`_valid_host` accepts it (no leading zeros)."""
    if not _IPV4_RE.fullmatch(host):
        return False
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return False
    return True


def _clean_authority(text: str, url: str, seed: bool) -> str:
    """``text`` with its userinfo dropped and its host decoded and IDNA 2008-encoded (steps 3 of the module doc).

    Raises:
        InvalidURL: ``url.userinfo`` for userinfo in a seed; ``url.host`` for
            a host that decodes to a forbidden character or is not IDNA 2008.
    """
    cut = text.find("?"), text.find("#")
    end = min((i for i in cut if i >= 0), default=len(text))
    head, rest = text[:end], text[end:]
    head = head.replace("\\", "/")  # URL living standard: "\\" is "/" in special schemes
    parts = urlsplit(head)
    netloc = parts.netloc
    if "@" in netloc:
        if seed:
            raise InvalidURL(
                Reason.URL_USERINFO,
                url,
                "a seed must not carry user:password@: a credential in a seed list is refused; "
                "links with userinfo are crawled without it",
            )
        netloc = netloc.rpartition("@")[2]
    if netloc.startswith("["):
        host, port = netloc, ""  # IPv6 literal: validated later
    else:
        host, colon, port = netloc.rpartition(":") if ":" in netloc else (netloc, "", "")
        port = colon + port
        host = idna_host(host, url)
    return parts._replace(netloc=host + port).geturl() + rest


def idna_host(host: str, url: str = "") -> str:
    """A host as canonical URLs spell it: escapes decoded, UTS 46 mapped, IDNA 2008 A-labels.

    ``"FA%C3%9F.de"`` and ``"faß.de"`` → ``"xn--fa-hia.de"``; ``"example%2Ecom"``
    → ``"example.com"``; an ASCII host is returned as found (validated later).

    Raises:
        InvalidURL: ``url.host`` for escapes that are not UTF-8, a decoded
            forbidden host character, or a label IDNA 2008 refuses.
    """
    if "%" in host:
        try:
            host = unquote(host, errors="strict")
        except UnicodeDecodeError:
            raise InvalidURL(Reason.URL_HOST, url) from None
        if _FORBIDDEN_HOST.search(host):
            raise InvalidURL(Reason.URL_HOST, url)
    if host.isascii():
        return host
    try:
        mapped = idna.uts46_remap(host, std3_rules=False, transitional=False)
        return ".".join(label if label.isascii() else idna.alabel(label).decode("ascii") for label in mapped.split("."))
    except (idna.IDNAError, UnicodeError, ValueError):
        raise InvalidURL(Reason.URL_HOST, url) from None


def _netloc(parts: SplitResult, scheme: str, url: str) -> str:
    """Validated ``host[:port]`` with the host lower-cased and the default port dropped."""
    host = _valid_host(parts, url)
    port = parts.port  # ValueError for a non-numeric or out-of-range port
    if port is None or port == _DEFAULT_PORTS.get(scheme):
        return host
    return f"{host}:{port}"


def _valid_host(parts: SplitResult, url: str) -> str:
    hostname = parts.hostname  # lower-cased by urllib, brackets removed
    if not hostname:
        raise InvalidURL(Reason.URL_HOST, url)
    if parts.netloc.startswith("["):
        try:
            address = ipaddress.IPv6Address(hostname)
        except ValueError:
            raise InvalidURL(Reason.URL_HOST, url) from None
        if address.scope_id is not None:  # a zone id ("%25eth0") names a local interface
            raise InvalidURL(Reason.URL_HOST, url)
        return f"[{address.compressed}]"  # RFC 5952 text form
    host = hostname[:-1] if hostname.endswith(".") else hostname
    labels = host.split(".")
    if len(host) > _MAX_HOST_LENGTH or not all(_LABEL_RE.fullmatch(label) for label in labels):
        raise InvalidURL(Reason.URL_HOST, url)
    # a host ending in a number is an IPv4 address or nothing (URL living standard)
    if labels[-1].isdigit() and not _is_ipv4(host):
        raise InvalidURL(Reason.URL_HOST, url)
    return host


def _normalize_escapes(component: str) -> str:
    """Stray ``%`` → ``%25``; decode escapes of unreserved characters, upper-case the hex of the others (RFC 3986 §6.2.2.1-2)."""
    if "%" not in component:
        return component
    component = _STRAY_PERCENT_RE.sub("%25", component)

    def fix(match: re.Match[str]) -> str:
        char = chr(int(match.group(1), 16))
        return char if char in _UNRESERVED else "%" + match.group(1).upper()

    return _PERCENT_RE.sub(fix, component)


def _remove_dot_segments(path: str) -> str:
    """Resolve ``.`` and ``..`` segments of an absolute path (RFC 3986 §5.2.4)."""
    if "/." not in path:
        return path
    output: list[str] = []
    segments = path[1:].split("/")
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        if segment == "..":
            if output:
                output.pop()
            if last:
                output.append("")  # "/a/b/.." -> "/a/"
        elif segment == ".":
            if last:
                output.append("")  # "/a/." -> "/a/"
        else:
            output.append(segment)
    return "/" + "/".join(output)


def _query(query: str, config: NormalizerConfig) -> str:
    """Query with removed parameters dropped, escapes normalized, order kept unless sorting is on."""
    if not query:
        return ""
    kept = []
    for pair in query.split("&"):
        if not pair:
            continue  # "a=1&&b=2": an empty pair names no parameter
        pair = _normalize_escapes(pair)
        name = unquote(pair.partition("=")[0].replace("+", " "))
        if not config.removes(name):
            kept.append(pair)
    if config.query_sort:
        kept.sort(key=lambda pair: pair.partition("="))  # by name, then value; stable
    return "&".join(kept)


def host_of(canonical_url: str) -> str:
    """Host of a canonical URL, lower case, without port (an IPv6 address without brackets).

    Raises:
        InvalidURL: ``url.host`` when the URL has no host; ``url.malformed`` when it cannot be split.
    """
    plain = _PLAIN_AUTHORITY.match(canonical_url)
    if plain is not None:
        return plain.group(1)  # what urlsplit would give, read off directly
    try:
        host = urlsplit(canonical_url.strip()).hostname
    except ValueError:
        raise InvalidURL(Reason.URL_MALFORMED, canonical_url) from None
    if not host:
        raise InvalidURL(Reason.URL_HOST, canonical_url)
    return host


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of ``url``: the authority a robots.txt applies to (RFC 9309 §2.3).

    Scheme and host are lower-cased and the scheme's default port dropped, so
    a canonical URL and its spelling variants share one origin; IPv6 hosts
    are bracketed. ``url`` should be canonical (IDN hosts are not converted).

    Raises:
        InvalidURL: ``url.host`` without a host, ``url.malformed`` for a bad port or brackets.
    """
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise InvalidURL(Reason.URL_MALFORMED, url) from None
    host = parts.hostname
    if not parts.scheme or not host:
        raise InvalidURL(Reason.URL_HOST, url)
    scheme = parts.scheme.lower()
    if ":" in host:
        host = f"[{host}]"
    if port is None or port == _DEFAULT_PORTS.get(scheme):
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


def robots_url(url: str) -> str:
    """URL of the robots.txt that governs ``url``: ``<origin>/robots.txt`` (RFC 9309 §2.3).

    Raises:
        InvalidURL: as :func:`origin_of`.
    """
    return origin_of(url) + "/robots.txt"
