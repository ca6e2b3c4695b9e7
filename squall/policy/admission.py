"""What a status message changes in a host record before its URLs are applied: seeding, refusals, dedup.

The status updater's decisions (StormCrawler's StatusUpdaterBolt; its
``scope`` checks are :mod:`squall.policy.scope`'s). Pure: records in, records out.

* **Seeding.** A seed puts its host in scope (``fetcher.scope.seeded.hosts``);
  under ``partition.url.mode: byIP`` one address serves several names, so
  only the seeded names are in scope (:meth:`HostRecord.with_seed`).
* **Refusals.** The parse step's refusals of a host's links are counted per
  reason in its record (``HostRecord.rejected``), never stored one by one.
* **Dedup.** A plain rediscovery of a known URL changes nothing: exact dedup
  on the canonical URL, without reading the stored record, unless the
  message carries what :func:`squall.policy.schedule.apply` acts on for a
  rediscovery (a sitemap's marker or ``lastmod``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from squall.policy.frontier import HostRecord
from squall.policy.reasons import Reason
from squall.policy.records import StatusMessage
from squall.policy.sitemaps import is_marked, lastmod_of
from squall.policy.urls import host_of


def seeded(host: HostRecord, urls: list[str], by_ip: bool) -> HostRecord:
    """``host`` after a seed message of ``urls`` (canonical): in scope (byIP: each URL's host name)."""
    if by_ip:
        for url in urls:
            if not host.seeded_for(host_of(url), True):
                host = host.with_seed(host_of(url))
        return host
    return host if host.seeded else replace(host, seeded=True)


def with_refusals(host: HostRecord, rejected: Mapping[Reason, int] | None) -> HostRecord:
    """``host`` with the parse step's refusals of its links added, per reason (``host`` itself when none)."""
    if not rejected:
        return host
    counts = dict(host.rejected)
    for reason, n in rejected.items():
        counts[reason.value] = counts.get(reason.value, 0) + n
    return replace(host, rejected=counts)


def news_for_known(msg: StatusMessage) -> bool:
    """Whether a DISCOVERED message can change the record of a known URL: a sitemap's marker or lastmod."""
    return is_marked(msg.metadata) or lastmod_of(msg.metadata) is not None


def nothing_if_known(msg: StatusMessage) -> bool:
    """Whether ``msg`` changes nothing for a URL already stored: a plain rediscovery.

    A result and a moved record (byIP, ``StatusMessage.moved``) always change
    something. Asked before the (costlier) lookup of the URL in the table.
    """
    return msg.fetched_at_s is None and msg.moved is None and not news_for_known(msg)
