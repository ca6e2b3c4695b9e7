"""Sitemaps: which sitemap URLs a host offers, and what of a sitemap enters the frontier.

Pure (no I/O, no Faust, no clock: ``now_s`` is passed in). A sitemap is an
ordinary URL of the frontier carrying the metadata marker ``isSitemap=true``
(StormCrawler's SiteMapParserBolt ``isSitemap``), so every sitemap fetch is a
paced request of its host through the fetch queues; only the parse step
differs: :func:`~squall.policy.sitemap_reader.read_sitemap` instead of the HTML parser.

Sources of the rules:

* sitemaps.org protocol 0.9: ``<urlset>`` of ``<url>`` (``loc``, ``lastmod``
  in W3C Datetime, ``changefreq``, ``priority`` 0.0–1.0, default 0.5),
  ``<sitemapindex>`` of ``<sitemap>`` (``loc``, ``lastmod``), a plain text
  file of one URL a line, an RSS 2.0 or Atom 0.3/1.0 feed (the protocol
  accepts them: item/entry link, pubDate/updated as lastmod), any of them
  gzip-compressed; at most 50 000 URLs and 50 MB uncompressed per file
  (``sitemap.max.urls``; the size is ``http.content.limit``).
* RFC 9309 §2.2.4: ``Sitemap:`` lines of robots.txt are not part of any group
  (Protego exposes them); a relative one is resolved against robots.txt.
* StormCrawler keys ``sitemap.discovery`` and
  ``sitemap.filter.hours.since.modified``.

How a file is read, and its errors (``sitemap.malformed``, ``sitemap.wrong_type``,
``sitemap.too_big``): :mod:`squall.policy.sitemap_reader`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING
from urllib.parse import urljoin

from protego import Protego

from squall.errors import InvalidURL
from squall.policy.reasons import Reason, ReasonCategory, Status
from squall.policy.records import StatusMessage
from squall.policy.sitemap_reader import (
    CHANGEFREQ_S,
    SitemapDocument,
    SitemapEntry,
    gunzip_limited,
    is_http_url,
    iso_utc,
    parse_w3c_datetime,
    read_sitemap,
)
from squall.policy.urls import NormalizerConfig, canonicalize

if TYPE_CHECKING:
    from squall.settings import Settings

__all__ = [
    "LEVEL_KEY",
    "SITEMAP_KEY",
    "SitemapConfig",
    "SitemapDocument",
    "SitemapEntry",
    "changefreq_interval_s",
    "discovery_statuses",
    "discovery_urls",
    "gunzip_limited",
    "is_marked",
    "judge_entries",
    "lastmod_of",
    "listed_statuses",
    "parse_w3c_datetime",
    "read_sitemap",
    "record_priority",
    "robots_sitemaps",
    "settle_status",
]

SITEMAP_KEY = "isSitemap"  # StormCrawler's marker: this URL is read as a sitemap
LEVEL_KEY = "sitemap.level"  # index nesting: 0 for a sitemap found in robots.txt or at the default path
LASTMOD_KEY = "sitemap.lastmod"  # on a listed URL: its <lastmod>, ISO 8601 UTC
CHANGEFREQ_KEY = "sitemap.changefreq"
PRIORITY_KEY = "sitemap.priority"
ERROR_KEY = "parse.sitemap.error"  # on the sitemap's own record: why it is broken
SITEMAP_PRIORITY = 2  # a sitemap goes before its host's other due URLs (seeds are 1, links 0)
DEFAULT_ENTRY_PRIORITY = 0.5  # sitemaps.org: <priority> when absent
MAX_FUTURE_LASTMOD_S = 86400.0  # a <lastmod> more than a day ahead of the clock is ignored (bogus)


@dataclass(frozen=True)
class SitemapConfig:
    """Sitemap settings.

    ``discovery``: robots.txt ``Sitemap:`` lines enter the frontier
    (``sitemap.discovery``). ``default_path``: path tried on a seeded host
    whose robots.txt lists none (``sitemap.default.path``; "" = off).
    ``max_urls``: entries read from one sitemap (``sitemap.max.urls``).
    ``max_nesting``: index levels followed (``sitemap.max.nesting``: a child
    of level > max_nesting is dropped). ``content_limit``: decoded bytes of
    a gunzipped sitemap kept, -1 = no limit (``http.content.limit``).
    ``max_age_s``: entries whose lastmod is older than this are dropped, None
    = keep all (``sitemap.filter.hours.since.modified``, hours → seconds).
    """

    discovery: bool
    default_path: str
    max_urls: int
    max_nesting: int
    content_limit: int
    max_age_s: float | None

    @classmethod
    def from_settings(cls, settings: Settings) -> SitemapConfig:
        """Copy the ``sitemap.*`` keys and ``http.content.limit`` (checked by :mod:`squall.settings.rules`)."""
        hours = settings.sitemap_filter_hours_since_modified
        return cls(
            discovery=settings.sitemap_discovery,
            default_path=settings.sitemap_default_path,
            max_urls=settings.sitemap_max_urls,
            max_nesting=settings.sitemap_max_nesting,
            content_limit=settings.http_content_limit,
            max_age_s=None if hours == -1 else hours * 3600.0,
        )


def is_marked(metadata: Mapping[str, Sequence[str]]) -> bool:
    """True when the URL's metadata marks it as a sitemap (``isSitemap=true``, case-insensitive)."""
    return any(str(v).strip().lower() == "true" for v in metadata.get(SITEMAP_KEY, ()))


# ---------------------------------------------------------------- where sitemaps come from


def robots_sitemaps(robots_text: str, robots_url: str) -> list[str]:
    """Absolute URLs of the ``Sitemap:`` lines of a robots.txt text, in order, without duplicates.

    Protego finds the lines (any group position, RFC 9309 §2.2.4); a
    relative value is resolved against ``robots_url``. Never raises.
    """
    out: list[str] = []
    try:
        listed = list(Protego.parse(robots_text).sitemaps)
    except Exception:  # Protego is lenient; a hostile text still must not stop the fetcher
        return out
    for value in listed:
        try:
            absolute = urljoin(robots_url, str(value).strip())
        except ValueError:
            continue
        if is_http_url(absolute) and absolute not in out:
            out.append(absolute)
    return out


def discovery_urls(robots_text: str | None, *, origin: str, host_seeded: bool, config: SitemapConfig) -> list[str]:
    """The sitemap URLs to emit once robots.txt of ``origin`` (``scheme://host[:port]``) is known.

    ``robots_text``: the decoded robots.txt, None when there is none (4xx,
    allow/disallow all). The ``Sitemap:`` lines when ``config.discovery``;
    else, or when it lists none, ``origin + config.default_path`` for a
    seeded host (``host_seeded``) when a default path is set.
    """
    listed = robots_sitemaps(robots_text, origin + "/robots.txt") if robots_text and config.discovery else []
    if listed:
        return listed
    if host_seeded and config.default_path:
        return [origin + config.default_path]
    return []


def discovery_statuses(urls: Sequence[str], normalizer: NormalizerConfig) -> list[StatusMessage]:
    """DISCOVERED messages of top-level sitemaps: marked, level 0, depth 0, priority ``SITEMAP_PRIORITY``.

    Depth 0: a sitemap a host offers is no hop of links from a seed. An
    unusable URL (invalid, see :func:`squall.policy.urls.canonicalize`) is skipped.
    """
    out: list[StatusMessage] = []
    for url in urls:
        try:
            canonical = canonicalize(url, normalizer)
        except InvalidURL:
            continue
        out.append(
            StatusMessage(
                url=canonical, depth=0, priority=SITEMAP_PRIORITY, metadata={SITEMAP_KEY: ["true"], LEVEL_KEY: ["0"]}
            )
        )
    return out


# ---------------------------------------------------------------- what enters the frontier


def record_priority(priority: float | None) -> int:
    """Frontier priority (higher first within a host) of a listed URL from its ``<priority>``.

    ``round((p - 0.5) * 10)``: the default 0.5 (or none) is 0, like a link
    found in a page; 1.0 is +5, 0.0 is -5.
    """
    p = DEFAULT_ENTRY_PRIORITY if priority is None else priority
    return math.floor((p - 0.5) * 10 + 0.5)


def changefreq_interval_s(metadata: Mapping[str, Sequence[str]]) -> tuple[bool, float | None]:
    """``(known, interval_s)`` from a record's ``sitemap.changefreq``: always/hourly 1 h, daily 24 h,
    weekly 7 d, monthly 30 d, yearly 365 d, never → (True, None) (no revisit); absent or unknown → (False, None)."""
    values = metadata.get(CHANGEFREQ_KEY) or ()
    freq = str(values[0]).lower() if values else ""
    if freq not in CHANGEFREQ_S:
        return False, None
    return True, CHANGEFREQ_S[freq]


def _level(metadata: Mapping[str, Sequence[str]]) -> int:
    try:
        return max(0, int((metadata.get(LEVEL_KEY) or ["0"])[0]))
    except (TypeError, ValueError):
        return 0


def judge_entries(
    doc: SitemapDocument,
    *,
    sitemap_url: str,
    depth: int,
    metadata: Mapping[str, Sequence[str]],
    inherited: Mapping[str, list[str]],
    now_s: float,
    config: SitemapConfig,
    normalizer: NormalizerConfig,
) -> Iterator[tuple[str, StatusMessage | Reason]]:
    """``(loc, message or refusal reason)`` for each entry of ``doc``, in order; see :func:`listed_statuses`.

    A refusal is ``url.*`` (from :func:`squall.policy.urls.canonicalize`),
    ``sitemap.duplicate``, ``sitemap.too_old`` or ``sitemap.too_deep``.
    """
    child_level = _level(metadata) + 1
    seen: set[str] = {sitemap_url}
    for entry in doc.entries:
        try:
            absolute = (
                entry.loc
                if entry.loc[:8].lower().startswith(("http://", "https://"))
                else urljoin(sitemap_url, entry.loc)
            )  # sitemaps.org wants absolute locs; urljoin only for the others
            url = canonicalize(absolute, normalizer)
        except InvalidURL as exc:
            yield entry.loc, exc.reason
            continue
        except ValueError:
            yield entry.loc, Reason.URL_MALFORMED
            continue
        if url in seen:
            yield entry.loc, Reason.SITEMAP_DUPLICATE
            continue
        seen.add(url)
        if doc.kind == "index":
            if child_level > config.max_nesting:
                yield entry.loc, Reason.SITEMAP_TOO_DEEP
                continue
            yield (
                entry.loc,
                StatusMessage(
                    url=url,
                    depth=depth + 1,
                    priority=SITEMAP_PRIORITY,
                    metadata={**inherited, SITEMAP_KEY: ["true"], LEVEL_KEY: [str(child_level)]},
                ),
            )
            continue
        lastmod = (
            entry.lastmod_s if entry.lastmod_s is not None and entry.lastmod_s <= now_s + MAX_FUTURE_LASTMOD_S else None
        )
        if config.max_age_s is not None and lastmod is not None and now_s - lastmod > config.max_age_s:
            yield entry.loc, Reason.SITEMAP_TOO_OLD
            continue
        meta = dict(inherited)
        if lastmod is not None:
            meta[LASTMOD_KEY] = [iso_utc(lastmod)]
        if entry.changefreq:
            meta[CHANGEFREQ_KEY] = [entry.changefreq]
        if entry.priority is not None:
            meta[PRIORITY_KEY] = [f"{entry.priority:g}"]
        yield (
            entry.loc,
            StatusMessage(url=url, depth=depth + 1, priority=record_priority(entry.priority), metadata=meta),
        )


def listed_statuses(
    doc: SitemapDocument,
    *,
    sitemap_url: str,
    depth: int,
    metadata: Mapping[str, Sequence[str]],
    inherited: Mapping[str, list[str]],
    now_s: float,
    config: SitemapConfig,
    normalizer: NormalizerConfig,
) -> tuple[dict[str, list[str]], list[StatusMessage]]:
    """(metadata recorded on the sitemap, DISCOVERED messages) of one read sitemap.

    ``sitemap_url``: the canonical URL of the sitemap (base of relative
    locs); ``metadata``: its own (its ``sitemap.level``); ``inherited``:
    what ``metadata.transfer`` passes to what it lists.

    * urlset / text / feed: each canonical URL at ``depth + 1`` with
      ``sitemap.lastmod`` (ISO UTC; a lastmod more than a day in the future
      is ignored), ``sitemap.changefreq``, ``sitemap.priority`` and the
      frontier priority of :func:`record_priority`; an entry older than
      ``config.max_age_s`` is dropped.
    * index: each child as a marked sitemap at ``depth + 1``, level + 1,
      priority ``SITEMAP_PRIORITY``; all dropped when level + 1 exceeds
      ``config.max_nesting``.

    Recorded (``parse.*``, persisted by default): ``parse.sitemap.kind``,
    ``parse.sitemap.urls`` (messages made), ``parse.sitemap.dropped``
    (over ``max_urls``, no loc, invalid URL, too old, too deep; duplicates
    are not counted) and ``parse.sitemap.error`` (the reason, see
    :func:`settle_status`).
    """
    dropped = doc.dropped
    out: list[StatusMessage] = []
    for _, verdict in judge_entries(
        doc,
        sitemap_url=sitemap_url,
        depth=depth,
        metadata=metadata,
        inherited=inherited,
        now_s=now_s,
        config=config,
        normalizer=normalizer,
    ):
        if isinstance(verdict, StatusMessage):
            out.append(verdict)
        elif verdict is not Reason.SITEMAP_DUPLICATE:
            dropped += 1
    recorded = {
        "parse.sitemap.kind": [doc.kind or "none"],
        "parse.sitemap.urls": [str(len(out))],
        "parse.sitemap.dropped": [str(dropped)],
    }
    if doc.error is not None:
        recorded[ERROR_KEY] = [doc.error.value]
    return recorded, out


def settle_status(msg: StatusMessage) -> StatusMessage:
    """A FETCHED sitemap whose metadata names a ``parse.sitemap.error`` becomes ERROR with that reason.

    The HTTP fetch worked, but the sitemap is unusable: it ends with a
    reason (StormCrawler's SiteMapParserBolt emits ERROR too); any other
    message is returned unchanged, and so is one whose ``parse.sitemap.error``
    is not a ``sitemap.*`` :class:`Reason` value (metadata from outside, not
    the parse step's: it names no reason).
    """
    errors = msg.metadata.get(ERROR_KEY)
    if msg.status is not Status.FETCHED or not errors:
        return msg
    try:
        reason = Reason.of(errors[0])
    except ValueError:
        return msg
    if reason.category is not ReasonCategory.SITEMAP:
        return msg
    return replace(msg, status=Status.ERROR, reason=reason)


def lastmod_of(metadata: Mapping[str, Sequence[str]]) -> float | None:
    """Unix seconds of a message's ``sitemap.lastmod``, None when absent or bad."""
    values = metadata.get(LASTMOD_KEY) or ()
    return parse_w3c_datetime(str(values[0])) if values else None
