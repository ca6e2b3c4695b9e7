"""Reading one sitemap's bytes: XML (sitemaps.org 0.9), RSS and Atom feeds, plain text, gzip.

Pure (no I/O, no clock). :func:`read_sitemap` turns a fetched body into a
:class:`SitemapDocument`; what its entries mean for the frontier is
:mod:`squall.policy.sitemaps`.

XML is read by defusedxml's iterparse (expat without entity expansion or
external references: a billion-laughs or XXE sitemap is ``sitemap.malformed``,
never expanded), streaming, so a 50 000-entry file never builds a tree.
Errors are a :class:`~squall.policy.reasons.Reason` on the document, never an
exception: ``sitemap.malformed`` (not XML, broken XML, bad gzip, empty),
``sitemap.wrong_type`` (an HTML answer, or XML whose root is not
``urlset``, ``sitemapindex``, ``rss`` or ``feed``), ``sitemap.too_big`` (the body, or its
gunzipped form, passed ``http.content.limit``). Entries read before an error
are kept (a sitemap cut short still lists its first URLs). Sources:
sitemaps.org protocol 0.9 (at most 50 000 URLs and 50 MB uncompressed per
file), RSS 2.0, Atom 0.3/1.0.
"""

from __future__ import annotations

import email.utils
import io
import re
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit
from xml.etree.ElementTree import ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import iterparse

from squall.policy.reasons import Reason

_GZIP_MAGIC = b"\x1f\x8b"
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_YEAR = re.compile(r"\d{4}")
_YEAR_MONTH = re.compile(r"\d{4}-\d{2}")
LINK_SCHEMES = frozenset({"http", "https"})
# changefreq → revisit interval (seconds); "never" = archived, not revisited (None)
CHANGEFREQ_S: dict[str, float | None] = {
    "always": 3600.0,
    "hourly": 3600.0,
    "daily": 86400.0,
    "weekly": 7 * 86400.0,
    "monthly": 30 * 86400.0,
    "yearly": 365 * 86400.0,
    "never": None,
}
# root element → (document kind, entry element, depth of the entries' parent)
_ROOTS: dict[str, tuple[str, str, int]] = {
    "urlset": ("urlset", "url", 1),
    "sitemapindex": ("index", "sitemap", 1),
    "rss": ("feed", "item", 2),
    "feed": ("feed", "entry", 1),  # RSS 2.0 <rss><channel><item>, Atom <feed><entry>
}


@dataclass(frozen=True)
class SitemapEntry:
    """One ``<url>`` / ``<sitemap>`` / text line: ``loc`` as written (stripped), lastmod in Unix seconds."""

    loc: str
    lastmod_s: float | None = None
    changefreq: str | None = None
    priority: float | None = None


@dataclass(frozen=True)
class SitemapDocument:
    """What one sitemap file holds.

    ``kind``: ``"urlset"``, ``"index"`` (entries are child sitemaps),
    ``"text"``, ``"feed"`` (RSS or Atom), or None when unreadable. ``entries``: at most ``max_urls``,
    in document order. ``dropped``: entries beyond ``max_urls`` or without a
    usable ``loc``. ``error``: a ``sitemap.*`` reason or None.
    """

    kind: str | None
    entries: tuple[SitemapEntry, ...] = ()
    dropped: int = 0
    error: Reason | None = None


def gunzip_limited(data: bytes, limit: int) -> tuple[bytes, bool]:
    """Gunzip one gzip member, keeping at most ``limit`` decoded bytes (-1 = no limit).

    Returns ``(decoded, over)``, ``over`` True when more than ``limit`` bytes
    would come out: decompression stops there, so a gzip bomb costs the
    limit, not its size. Raises :class:`zlib.error` for data that is not
    gzip or is cut inside the header.
    """
    inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
    if limit < 0:
        return inflater.decompress(data) + inflater.flush(), False
    out = inflater.decompress(data, limit + 1)  # one byte past the limit tells "more"
    return out[:limit], len(out) > limit


def read_sitemap(
    body: bytes, *, content_type: str | None, truncated: bool, max_urls: int, content_limit: int
) -> SitemapDocument:
    """Read a fetched sitemap body (already decoded of its Content-Encoding); never raises.

    ``content_type``: the mime type without parameters (None if absent);
    ``truncated``: the fetch cut the body at ``http.content.limit``.
    A body starting with the gzip magic bytes is gunzipped first (a
    ``.xml.gz`` is usually served as ``application/gzip`` without
    Content-Encoding), bounded by ``content_limit``. Then: first
    non-blank character ``<`` → XML, else a text sitemap. A body served
    as HTML is ``sitemap.wrong_type`` unless it reads as a clean XML
    urlset, index or feed (a mislabelled sitemap).
    """
    too_big = truncated
    if body[:2] == _GZIP_MAGIC:
        try:
            body, over = gunzip_limited(body, content_limit)
        except zlib.error:
            return SitemapDocument(kind=None, error=Reason.SITEMAP_MALFORMED)
        too_big = too_big or over
    head = body[:512].lstrip(b"\xef\xbb\xbf \t\r\n")
    doc = _read_xml(body, max_urls) if head.startswith(b"<") else _read_text(body, max_urls)
    if (content_type or "").lower() in _HTML_TYPES and (doc.kind in (None, "text") or doc.error is not None):
        # served as HTML and not a clean XML sitemap: a page, not a sitemap (a clean one is kept: servers
        # mislabel sitemaps more often than they serve well-formed urlsets by mistake)
        return SitemapDocument(kind=None, error=Reason.SITEMAP_WRONG_TYPE)
    if too_big:  # whatever broke at the cut, the cause is the size
        return SitemapDocument(kind=doc.kind, entries=doc.entries, dropped=doc.dropped, error=Reason.SITEMAP_TOO_BIG)
    return doc


def _local(tag: Any) -> str:
    """Element name without its namespace (``{ns}url`` → ``url``); lenient about missing namespaces."""
    return tag.rsplit("}", 1)[-1].lower() if isinstance(tag, str) else ""


def _read_xml(body: bytes, max_urls: int) -> SitemapDocument:
    kind: str | None = None
    item = ""
    item_depth = 1
    entries: list[SitemapEntry] = []
    dropped = 0
    depth = 0
    root = None
    try:
        for event, elem in iterparse(io.BytesIO(body), events=("start", "end")):
            if event == "start":
                depth += 1
                if root is None:
                    root = elem
                    known = _ROOTS.get(_local(elem.tag))
                    if known is None:
                        return SitemapDocument(kind=None, error=Reason.SITEMAP_WRONG_TYPE)
                    kind, item, item_depth = known
                continue
            depth -= 1
            if depth != item_depth or _local(elem.tag) != item:
                continue  # only entries at their own level (not <image:loc> and the like)
            entry = _feed_entry(elem) if kind == "feed" else _entry(elem)
            if entry is None or len(entries) >= max_urls:
                dropped += 1
            else:
                entries.append(entry)
            # the entry is read: let it go (streaming, bounded memory; an RSS item sits inside <channel>)
            done = root if item_depth == 1 else elem
            if done is not None:
                done.clear()
    except (ParseError, DefusedXmlException, ValueError):
        return SitemapDocument(kind=kind, entries=tuple(entries), dropped=dropped, error=Reason.SITEMAP_MALFORMED)
    if kind is None:
        return SitemapDocument(kind=None, error=Reason.SITEMAP_MALFORMED)
    return SitemapDocument(kind=kind, entries=tuple(entries), dropped=dropped)


def _entry(elem: Any) -> SitemapEntry | None:
    fields: dict[str, str] = {}
    for child in elem:
        name = _local(child.tag)
        if name in ("loc", "lastmod", "changefreq", "priority") and name not in fields:
            fields[name] = (child.text or "").strip()
    loc = fields.get("loc", "")
    if not loc:
        return None
    changefreq = fields.get("changefreq", "").lower() or None
    return SitemapEntry(
        loc=loc,
        lastmod_s=parse_w3c_datetime(fields.get("lastmod", "")),
        changefreq=changefreq if changefreq in CHANGEFREQ_S else None,
        priority=_priority(fields.get("priority", "")),
    )


def _feed_entry(elem: Any) -> SitemapEntry | None:
    """An RSS 2.0 ``<item>`` (``link`` text, ``pubDate`` RFC 822) or an Atom ``<entry>``
    (``link href`` with no rel or rel=alternate, ``updated`` / Atom 0.3 ``modified``)."""
    loc = ""
    lastmod_s: float | None = None
    for child in elem:
        name = _local(child.tag)
        if name == "link" and not loc:
            rel = (child.get("rel") or "alternate").lower()
            loc = (child.get("href") or (child.text or "") if rel == "alternate" else "").strip()
        elif name == "pubdate" and lastmod_s is None:
            lastmod_s = _rfc822_s(child.text or "")
        elif name in ("updated", "modified") and lastmod_s is None:
            lastmod_s = parse_w3c_datetime(child.text or "")
    return SitemapEntry(loc=loc, lastmod_s=lastmod_s) if loc else None


def _rfc822_s(text: str) -> float | None:
    try:
        moment = email.utils.parsedate_to_datetime(text.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _priority(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0.0 <= value <= 1.0 else None  # out of range or NaN: as if absent


def _read_text(body: bytes, max_urls: int) -> SitemapDocument:
    text = body.decode("utf-8", errors="replace").lstrip("\ufeff")
    entries: list[SitemapEntry] = []
    dropped = 0
    lines = 0
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        lines += 1
        if not is_http_url(line) or len(entries) >= max_urls:
            dropped += 1
        else:
            entries.append(SitemapEntry(loc=line))
    if not entries:  # empty, or no line is a URL: nothing here is a sitemap
        return SitemapDocument(kind=None, dropped=dropped, error=Reason.SITEMAP_MALFORMED)
    return SitemapDocument(kind="text", entries=tuple(entries), dropped=dropped)


def is_http_url(text: str) -> bool:
    try:
        parts = urlsplit(text)
    except ValueError:
        return False
    return parts.scheme.lower() in LINK_SCHEMES and bool(parts.netloc) and " " not in text


def parse_w3c_datetime(text: str) -> float | None:
    """Unix seconds of a W3C Datetime (``YYYY``, ``YYYY-MM``, ``YYYY-MM-DD``, with time and zone); None if bad.

    A value without a zone is taken as UTC (the profile requires one with a time).
    """
    text = text.strip()
    if not text:
        return None
    try:
        if _YEAR.fullmatch(text):
            moment = datetime(int(text), 1, 1)
        elif _YEAR_MONTH.fullmatch(text):
            moment = datetime(int(text[:4]), int(text[5:7]), 1)
        else:
            moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def iso_utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
