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

from collections.abc import Callable, Mapping

from squall.policy.codec import evolve
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
    return host if host.seeded else evolve(host, seeded=True)


def with_refusals(host: HostRecord, rejected: Mapping[Reason, int] | None) -> HostRecord:
    """``host`` with the parse step's refusals of its links added, per reason (``host`` itself when none)."""
    if not rejected:
        return host
    counts = dict(host.rejected)
    for reason, n in rejected.items():
        counts[reason.value] = counts.get(reason.value, 0) + n
    return evolve(host, rejected=counts)


def news_for_known(msg: StatusMessage) -> bool:
    """Whether a DISCOVERED message can change the record of a known URL: a sitemap's marker or lastmod."""
    return is_marked(msg.metadata) or lastmod_of(msg.metadata) is not None


def nothing_if_known(msg: StatusMessage) -> bool:
    """Whether ``msg`` changes nothing for a URL already stored: a plain rediscovery.

    A result and a moved record (byIP, ``StatusMessage.moved``) always change
    something. Asked before the (costlier) lookup of the URL in the table.
    """
    return msg.fetched_at_s is None and msg.moved is None and not news_for_known(msg)


def left_to_send(
    batches: list[StatusMessage],
    *,
    known: Callable[[str, int], bool],
    refused: Callable[[str, int, int], Reason | None],
    partition_of: Callable[[str], int],
) -> tuple[list[StatusMessage], dict[Reason, int]]:
    """The parse step's outlink batches less what this worker can settle itself → (batches, refusals per reason).

    ``batches``: DISCOVERED messages, one per Kafka partition, as
    :func:`squall.policy.scope.batch_outlinks` makes them; ``partition_of``:
    a URL's partition (every URL of a batch shares it: asked once per
    batch). For each link:

    * ``refused(url, partition, depth)`` a reason — the URL's host has no
      record, and the status updater would refuse the URL with that reason
      and count it in no record either (:mod:`agents.status_writes`): it is
      left out and counted in the returned refusals. Asked first: a link to
      a host without a record (an unseeded host's) is most often a new URL,
      whose lookup in the urls table would find nothing;
    * else ``known(url, partition)`` True — the URL has a record in the urls
      table: a plain rediscovery changes nothing (the status updater's exact
      dedup), so it is left out.

    Both callers answer False / None for a partition they cannot see, so an
    unknown answer only costs a message. A batch that :func:`nothing_if_known`
    excludes (a sitemap's marker or ``lastmod``) is kept whole. A batch left
    with no link is dropped, unless it carries refusal counts: those still
    reach their hosts' records, riding on one of its links (a known one is a
    no-op for the status updater; a refused one is counted there as here).
    Order is kept.
    """
    out: list[StatusMessage] = []
    refusals: dict[Reason, int] = {}
    for batch in batches:
        if not nothing_if_known(batch):
            out.append(batch)
            continue
        partition = partition_of(batch.url)
        kept: list[str] = []
        reasons: dict[str, Reason] = {}
        for url in (batch.url, *batch.more_urls):
            reason = refused(url, partition, batch.depth)
            if reason is not None:
                reasons[url] = reason
            elif not known(url, partition):
                kept.append(url)
        if not kept and batch.rejected:  # the refusal counts ride on its first link, counted there if refused
            kept = [batch.url]
            reasons.pop(batch.url, None)
        for reason in reasons.values():
            refusals[reason] = refusals.get(reason, 0) + 1
        if len(kept) == 1 + len(batch.more_urls):
            out.append(batch)
        elif kept:
            out.append(evolve(batch, url=kept[0], more_urls=kept[1:]))
    return out, refusals
