"""Sitemap steps of the fetcher's process: the robots.txt hook and the sitemap parse.

The decisions are :mod:`squall.policy.sitemaps`' (pure); this module reads the
settings, the host record and sends messages. A sitemap is an ordinary URL
of the frontier marked ``isSitemap=true``: it is handed out, robots-checked,
queued and paced like any other URL of its host; only its parse differs.
"""

from __future__ import annotations

import logging
import time

from agents.common import config, load_host
from squall.net.http import FetchResult
from squall.policy import metadata as md
from squall.policy.partition import partition_key
from squall.policy.records import StatusMessage
from squall.policy.robots_status import RobotsEntry
from squall.policy.sitemaps import discovery_statuses, discovery_urls, listed_statuses, read_sitemap
from squall.policy.urls import host_of
from topology import status_topic

log = logging.getLogger("squall.policy.sitemaps")


async def emit_robots_sitemaps(origin: str, entry: RobotsEntry, key: str) -> None:
    """Hook where robots.txt of ``origin`` was fetched: its sitemaps enter the status topic as DISCOVERED.

    ``key`` is the partition key of the URL whose fetch needed robots.txt
    (its host record says whether the host was seeded, for
    ``sitemap.default.path``). Nothing is emitted while robots.txt is
    unreachable (the host waits; the retry emits). Already known sitemap
    URLs are deduplicated by the status updater. Never raises.
    """
    try:
        if entry.blocks_origin:
            return
        urls = discovery_urls(
            entry.robots_text,
            origin=origin,
            config=config().sitemap,
            host_seeded=load_host(key).seeded_for(host_of(origin), config().by_ip),
        )
        for status in discovery_statuses(urls, config().normalizer):
            await status_topic.send(key=partition_key(status.url, config().mode).encode(), value=status.to_bytes())
    except Exception:  # discovery is best effort: the page fetch goes on
        log.exception("squall: sitemap discovery for %s failed", origin)


def parse_sitemap(
    result: FetchResult, *, depth: int, metadata: dict[str, list[str]]
) -> tuple[dict[str, list[str]], list[StatusMessage]]:
    """Read a fetched sitemap → (metadata to record, DISCOVERED messages); see :func:`listed_statuses`."""
    doc = read_sitemap(
        result.body,
        content_type=result.content_type,
        truncated=result.truncated,
        max_urls=config().sitemap.max_urls,
        content_limit=config().sitemap.content_limit,
    )
    if doc.error is not None:
        log.info("squall: sitemap %s: %s (%d entries kept)", result.url, doc.error.value, len(doc.entries))
    return listed_statuses(
        doc,
        sitemap_url=result.url,
        depth=depth,
        metadata=metadata,
        inherited=md.for_outlink(metadata, config().transfer),
        now_s=time.time(),
        config=config().sitemap,
        normalizer=config().normalizer,
    )
