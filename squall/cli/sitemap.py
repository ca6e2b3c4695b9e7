"""``squall sitemap check URL|FILE``: what a sitemap would put in the frontier, and why the rest would not enter.

Reads a file (or fetches one loopback URL once, through :mod:`squall.net.http`
with the configured limits), reads it with :func:`squall.policy.sitemaps.read_sitemap`
and judges every entry as the crawl would: canonical URL, then the scope and
trap guards of :func:`squall.policy.scope.check` (the configuration's
``urlfilters.*`` and ``frontier.max.urls.per.host``; the host URL count
starts at 0 and grows with each admitted URL). Prints one line per entry::

    admit URL priority=N [lastmod=... changefreq=...]
    sitemap URL level=N             (a child of an index: would be fetched as a sitemap)
    refuse URL REASON

then ``error: REASON`` for a broken sitemap and a summary line. Exit code
0, 1 when the sitemap is broken, 2 when it cannot be read.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import sys
import time
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

from squall.errors import FetchError
from squall.policy.reasons import Reason
from squall.policy.records import StatusMessage
from squall.policy.scope import ScopeConfig, check
from squall.policy.sitemaps import (
    CHANGEFREQ_KEY,
    LASTMOD_KEY,
    LEVEL_KEY,
    SitemapConfig,
    is_marked,
    judge_entries,
    read_sitemap,
)
from squall.policy.urls import NormalizerConfig, canonicalize
from squall.settings import Settings, load_settings

_TYPES_BY_SUFFIX = ((".gz", "application/gzip"), (".txt", "text/plain"))


def _is_loopback_url(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def _fetch_once(url: str, settings: Settings) -> tuple[bytes, str | None, bool]:
    from squall.net.http import HttpConfig, HttpFetcher

    loopback = settings.with_overrides({"http.private.networks.allow": ["127.0.0.0/8", "::1/128"]})
    async with HttpFetcher(HttpConfig.from_settings(loopback)) as http:
        result = await http.fetch(url)
    if result.status != 200:
        raise FetchError(_answer_reason(result.status), f"{url} answered {result.status}")
    return result.body, result.content_type, result.truncated


def _answer_reason(status: int) -> Reason:
    """The reason a non-200 answer to ``squall sitemap check`` is reported with."""
    if status in (404, 410):
        return Reason.HTTP_NOT_FOUND
    if 400 <= status < 500:
        return Reason.HTTP_CLIENT_ERROR
    if 500 <= status < 600:
        return Reason.HTTP_SERVER_ERROR
    return Reason.FETCH_PROTOCOL  # a redirect or another status: not the sitemap's body


def _describe(msg: StatusMessage) -> str:
    if is_marked(msg.metadata):
        return f"sitemap {msg.url} level={msg.metadata[LEVEL_KEY][0]}"
    extra = "".join(
        f" {name}={msg.metadata[key][0]}"
        for name, key in (("lastmod", LASTMOD_KEY), ("changefreq", CHANGEFREQ_KEY))
        if key in msg.metadata
    )
    return f"admit {msg.url} priority={msg.priority}{extra}"


def run_check(
    source: str,
    settings: Settings,
    *,
    seeded: list[str],
    depth: int,
    sitemap_url: str | None,
    content_type: str | None,
    out: Any = sys.stdout,
) -> int:
    """Check one sitemap file or loopback URL; prints the verdicts to ``out``; returns the exit code."""
    normalizer = NormalizerConfig.from_settings(settings)
    config = SitemapConfig.from_settings(settings)
    scope = ScopeConfig.from_settings(settings)
    is_url = source.lower().startswith(("http://", "https://"))
    try:
        if is_url:
            if not _is_loopback_url(source):
                print(
                    "squall: sitemap check fetches loopback URLs only; download the file and check it", file=sys.stderr
                )
                return 2
            body, served_type, truncated = asyncio.run(_fetch_once(source, settings))
            content_type = content_type or served_type
            sitemap_url = sitemap_url or source
        else:
            with open(source, "rb") as handle:
                body = handle.read()
            limit = settings.http_content_limit
            truncated = 0 <= limit < len(body)
            body = body[:limit] if truncated else body
            content_type = content_type or next(
                (t for suffix, t in _TYPES_BY_SUFFIX if source.endswith(suffix)), "application/xml"
            )
    except (OSError, FetchError) as exc:
        print(f"squall: cannot read {source}: {exc}", file=sys.stderr)
        return 2
    base = canonicalize(sitemap_url, normalizer) if sitemap_url else ""
    seeded_hosts = {h.lower() for h in seeded} or ({urlsplit(base).hostname or ""} if base else set())
    doc = read_sitemap(
        body,
        content_type=content_type,
        truncated=truncated,
        max_urls=config.max_urls,
        content_limit=config.content_limit,
    )
    counts: Counter[str] = Counter()
    per_host: Counter[str] = Counter()
    for loc, verdict in judge_entries(
        doc,
        sitemap_url=base,
        depth=depth,
        metadata={LEVEL_KEY: ["0"]},
        inherited={},
        now_s=time.time(),
        config=config,
        normalizer=normalizer,
    ):
        if isinstance(verdict, Reason):
            print(f"refuse {loc} {verdict}", file=out)
            counts["refused"] += 1
            continue
        host = urlsplit(verdict.url).hostname or ""
        reason = check(
            verdict.url,
            depth=verdict.depth,
            host_seeded=not seeded_hosts or host in seeded_hosts,
            host_url_count=per_host[host],
            config=scope,
        )
        if reason is not None:
            print(f"refuse {verdict.url} {reason.value}", file=out)
            counts["refused"] += 1
            continue
        per_host[host] += 1
        counts["sitemaps" if is_marked(verdict.metadata) else "admitted"] += 1
        print(_describe(verdict), file=out)
    if doc.dropped:
        print(f"dropped {doc.dropped} entries (over sitemap.max.urls {config.max_urls}, or without a URL)", file=out)
    if doc.error is not None:
        print(f"error: {doc.error.value}", file=out)
    print(
        f"{doc.kind or 'unreadable'}: {counts['admitted']} admitted, {counts['sitemaps']} sitemaps, "
        f"{counts['refused'] + doc.dropped} refused",
        file=out,
    )
    return 1 if doc.error is not None else 0


def _check_command(args: argparse.Namespace) -> int:
    settings = load_settings(args.conf)
    return run_check(
        args.source,
        settings,
        seeded=args.seeded,
        depth=args.depth,
        sitemap_url=args.url,
        content_type=args.content_type,
    )


def add_parser(subparsers: Any) -> None:
    """Register ``squall sitemap check [--seeded HOST] [--url URL] URL|FILE``."""
    sitemap = subparsers.add_parser("sitemap", help="sitemap tools (sitemaps.org protocol)")
    commands = sitemap.add_subparsers(dest="sitemap_command", required=True)
    cmd = commands.add_parser(
        "check",
        help="print the URLs a sitemap would admit and why it would refuse the rest",
        description="Read a sitemap file (or fetch a loopback URL once) and judge each entry as the crawl "
        "would: canonical URL, scope and trap guards of the configuration. Exit 1 if the "
        "sitemap is broken, 2 if it cannot be read.",
    )
    cmd.add_argument("source", metavar="URL|FILE", help="a sitemap file, or a loopback http(s) URL")
    cmd.add_argument(
        "--seeded",
        action="append",
        default=[],
        metavar="HOST",
        help="a host counted as seeded (repeatable); default: the sitemap's host, or every "
        "host for a file without --url",
    )
    cmd.add_argument("--url", metavar="URL", help="where a file was served from (base of relative entries)")
    cmd.add_argument("--depth", type=int, default=0, help="depth of the sitemap itself (default 0)")
    cmd.add_argument("--content-type", metavar="TYPE", help="Content-Type to assume (default: by file suffix)")
    cmd.set_defaults(func=_check_command)
