"""Parser step (StormCrawler's JSoupParserBolt), called in-process by the fetcher.

Turns a fetched page into DISCOVERED outlinks (canonical, depth + 1, with
the metadata ``metadata.transfer`` passes on), honouring ``<base href>``,
``rel=nofollow`` and meta robots / X-Robots-Tag ``nofollow``. Links go out
batched, one status message per Kafka partition
(:func:`squall.policy.scope.batch_outlinks`); those refused whatever their host
(scheme, include/exclude, depth, query parameters, repeated segments) are
only counted in it, never sent one by one. Why there is no parse topic: see
:mod:`topology`.
"""

from __future__ import annotations

import asyncio

from agents.common import config
from agents.observe import count_refused
from agents.sitemaps import parse_sitemap
from agents.worker_state import known_here, refused_here
from squall.net.http import FetchResult
from squall.policy import metadata as md
from squall.policy.admission import left_to_send
from squall.policy.parse import is_parseable, parse_html
from squall.policy.partition import partition_for_key, partition_key
from squall.policy.records import FetchMessage, StatusMessage
from squall.policy.scope import batch_outlinks
from squall.policy.sitemaps import is_marked
from topology import settings

# byIP keys need a DNS answer the parse step does not have: its batches then group by host name


def parse(
    result: FetchResult, *, depth: int, metadata: dict[str, list[str]]
) -> tuple[dict[str, list[str]], list[StatusMessage]]:
    """Parse a fetched page → (metadata to record, DISCOVERED outlink messages).

    The recorded metadata (``parse.*`` keys, kept when ``metadata.persist``
    names them — the default) says ``parse.noindex`` / ``parse.nofollow``
    (meta robots or X-Robots-Tag), ``parse.canonical`` (rel=canonical),
    ``parse.title`` and ``parse.charset``; a page that went through the
    browser also ``parse.render*`` (:meth:`squall.policy.render_policy.RenderOutcome.metadata`).
    Content types outside ``parser.mimetypes`` are not parsed (they are still archived). A URL
    marked ``isSitemap=true`` is read as a sitemap instead
    (:func:`agents.sitemaps.parse_sitemap`), whatever its content type.
    """
    if is_marked(metadata):
        return parse_sitemap(result, depth=depth, metadata=metadata)
    if not is_parseable(result.content_type, config().mimetypes):
        return {}, []
    parsed = parse_html(
        result.body, url=result.url, headers=result.headers, agent_token=config().agent_token, text_length=False
    )
    recorded = _recorded(parsed, result)
    if parsed.nofollow:
        return recorded, []
    inherited = md.for_outlink(metadata, config().transfer)
    return recorded, batch_outlinks(
        parsed.outlinks,
        page_url=result.url,
        depth=depth + 1,
        metadata=inherited,
        canonical=config().canonical,
        mode=config().parse_mode,
        partitions=config().partitions,
        judge=config().judge,
    )


def _recorded(parsed, result: FetchResult) -> dict[str, list[str]]:
    """The ``parse.*`` metadata of a parsed page (and ``parse.render*`` of a rendered one)."""
    recorded = {"parse.charset": [parsed.charset]}
    if result.render is not None:
        recorded.update(result.render.metadata())
    if parsed.noindex:
        recorded["parse.noindex"] = ["true"]
    if parsed.nofollow:
        recorded["parse.nofollow"] = ["true"]
    if parsed.canonical:
        recorded["parse.canonical"] = [parsed.canonical]
    if parsed.title:
        recorded["parse.title"] = [parsed.title[: settings.parser_title_max_chars]]
    return recorded


async def parse_fetched(
    msg: FetchMessage, result: FetchResult, inline_max_bytes: int
) -> tuple[dict[str, list[str]], list[StatusMessage]]:
    """:func:`parse` of a hand-out's page: on the loop up to ``inline_max_bytes`` (``parser.inline.max.bytes``).

    A larger page, and any sitemap, is parsed in a thread: a 50 000-entry
    sitemap or a large page takes seconds to read, off the event loop; a
    small page costs less than the hand-off to a thread.

    Then, on the loop, what this worker can settle itself for the
    partitions it owns (:func:`squall.policy.admission.left_to_send`) costs
    no message: a link it already stores (a rediscovery changes nothing),
    and one the status updater would refuse for a host with no record (e.g.
    ``scope.host``: counted in ``squall_links_refused``, as the status
    updater would count it). Not under byIP, whose batches group by host
    name, not by the key that holds the records.
    """
    if len(result.body) <= inline_max_bytes and not is_marked(msg.metadata):
        recorded, found = parse(result, depth=msg.depth, metadata=msg.metadata)
    else:
        recorded, found = await asyncio.to_thread(parse, result, depth=msg.depth, metadata=msg.metadata)
    if config().by_ip or not found:
        return recorded, found
    found, refusals = left_to_send(found, known=known_here, refused=refused_here, partition_of=_partition_of)
    if refusals:
        count_refused({reason.value: n for reason, n in refusals.items()})
    return recorded, found


def _partition_of(url: str) -> int:
    """The Kafka partition of a canonical outlink: that of its partition key (``partition.url.mode``)."""
    return partition_for_key(partition_key(url, config().mode), config().partitions)
