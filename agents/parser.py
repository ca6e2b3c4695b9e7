"""Parser step (StormCrawler's JSoupParserBolt), called in-process by the fetcher.

Turns a fetched page into DISCOVERED outlinks (canonical, depth + 1, with
the metadata ``metadata.transfer`` passes on), honouring ``<base href>``,
``rel=nofollow`` and meta robots / X-Robots-Tag ``nofollow``. Why there is
no parse topic: see :mod:`topology`.
"""

from __future__ import annotations

from agents.sitemaps import parse_sitemap
from squall import metadata as md
from squall.errors import InvalidURL
from squall.http import FetchResult
from squall.parse import is_parseable, parse_html
from squall.records import StatusMessage
from squall.robots_policy import product_token
from squall.sitemaps import is_marked, settle_status
from squall.urls import NormalizerConfig, canonicalize
from topology import settings

NORMALIZER = NormalizerConfig.from_settings(settings)
MIMETYPES = tuple(settings["parser.mimetypes"])
TRANSFER = tuple(settings["metadata.transfer"])
AGENT_TOKEN = product_token(settings["http.agent.name"])


def parse(result: FetchResult, *, depth: int, metadata: dict[str, list[str]]
          ) -> tuple[dict[str, list[str]], list[StatusMessage]]:
    """Parse a fetched page → (metadata to record, DISCOVERED outlink messages).

    The recorded metadata (``parse.*`` keys, kept when ``metadata.persist``
    names them — the default) says ``parse.noindex`` / ``parse.nofollow``
    (meta robots or X-Robots-Tag), ``parse.canonical`` (rel=canonical),
    ``parse.title`` and ``parse.charset``; a page that went through the
    browser also ``parse.render*`` (:meth:`squall.render_policy.RenderOutcome.metadata`).
    Content types outside ``parser.mimetypes`` are not parsed (they are still archived). A URL
    marked ``isSitemap=true`` is read as a sitemap instead
    (:func:`agents.sitemaps.parse_sitemap`), whatever its content type.
    """
    if is_marked(metadata):
        return parse_sitemap(result, depth=depth, metadata=metadata)
    if not is_parseable(result.content_type, MIMETYPES):
        return {}, []
    parsed = parse_html(result.body, url=result.url, headers=result.headers, agent_token=AGENT_TOKEN)
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
        recorded["parse.title"] = [parsed.title[:300]]
    if parsed.nofollow:
        return recorded, []
    inherited = md.for_outlink(metadata, TRANSFER)
    out: list[StatusMessage] = []
    seen: set[str] = set()
    for link in parsed.outlinks:
        try:
            url = canonicalize(link, NORMALIZER)
        except InvalidURL:
            continue  # mailto:, javascript:, malformed: not crawlable links
        if url not in seen and url != result.url:
            seen.add(url)
            out.append(StatusMessage(url=url, depth=depth + 1, metadata=inherited))
    return recorded, out


def settle(status: StatusMessage) -> StatusMessage:
    """The page's own status after its parse: a broken sitemap ends ERROR with its reason (``sitemap.*``)."""
    return settle_status(status)
