"""The documents step (StormCrawler's IndexerBolt): one JSON document per FETCHED HTML page on ``<id>-documents``.

Called by the fetcher right after the parse step, inside the fetch's task,
so the document is sent before the fetch event is acknowledged: a crash
before the acknowledgement fetches and sends it again (at-least-once; a
search index keeps one document per URL, :mod:`squall.index`). Every
decision is :mod:`squall.policy.documents`' — imported on first use only,
so with ``documents.enabled: false`` the text extraction library is never
loaded and a page costs one attribute test.

Only pages the parse step read as HTML (``parser.mimetypes``; sitemaps are
not documents) give one; a page whose meta robots or X-Robots-Tag says
``noindex`` gives none, counted in ``squall_documents{outcome="noindex.*"}``.
Keyed by the URL's partition key (the hand-out's key), like every message of
the URL. The text is extracted on the event loop for a page of at most
``parser.inline.max.bytes``, in a thread for a larger one.
"""

from __future__ import annotations

import asyncio
import functools
from types import ModuleType
from typing import TYPE_CHECKING

from agents.observe import observed
from squall.net.http import FetchResult
from squall.net.warc import payload_digest
from squall.policy.parse import is_parseable
from squall.policy.records import FetchMessage, StatusMessage
from squall.policy.robots_rules import product_token
from squall.policy.sitemaps import is_marked
from topology import documents_topic, settings

if TYPE_CHECKING:
    from squall.policy.documents import DocumentsConfig

SENT = "sent"  # the outcome label of a document sent (the others: squall.policy.documents.Skip)


@functools.cache
def _policy() -> ModuleType:
    from squall.policy import documents  # Resiliparse: loaded only once documents are on

    return documents


@functools.cache
def _config() -> DocumentsConfig:
    return _policy().DocumentsConfig.from_settings(settings, product_token(settings.http_agent_name))


async def emit(
    msg: FetchMessage, result: FetchResult, parsed: tuple[dict[str, list[str]], list[StatusMessage]] | None
) -> None:
    """Send the document of ``result`` (a FETCHED page and its parse step's output), if it gives one.

    ``parsed``: what :func:`agents.parser.parse` returned, None when the
    page was not parsed (not FETCHED). A delivery error raises (the fetch
    is then retried, as for its statuses).
    """
    if not settings.documents_enabled or parsed is None:
        return
    if is_marked(msg.metadata) or not is_parseable(result.content_type, settings.parser_mimetypes):
        return
    policy, config = _policy(), _config()
    recorded = parsed[0]
    skip = policy.noindex_reason(result.headers, recorded, config.agent_token)
    if skip is not None:
        observed().metrics.documents.labels(outcome=skip.value).inc()
        return
    charset = (recorded.get("parse.charset") or ["utf-8"])[0]
    if len(result.body) <= settings.parser_inline_max_bytes:
        page = policy.extract(result.body, charset)
    else:
        page = await asyncio.to_thread(policy.extract, result.body, charset)
    document = policy.build(
        url=msg.url,
        fetched_at_s=result.ended_at_s,
        http_status=result.status,
        content_type=result.content_type,
        recorded=recorded,
        page=page,
        payload_digest=result.payload_digest or payload_digest(result.body),
        metadata=msg.metadata,
        rendered=result.render is not None and result.render.failure is None,
        config=config,
    )
    await documents_topic.send(key=msg.key.encode(), value=document.to_bytes())
    observed().metrics.documents.labels(outcome=SENT).inc()
