"""Documents through the real broker: one per FETCHED HTML page, languages, noindex, digests, the search index."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from squall.net.kafka_security import KafkaConnection
from squall.net.warc import payload_digest
from squall.policy.documents import Document
from squall.policy.partition import partition_key
from squall.policy.topics import topic_name
from squall.settings import ROOT
from squall.tools.harness import Crawl
from squall.tools.site_spec import HostSpec, Page, SiteSpec
from tests.unit.texts import UNIQUE, page

HOST = "127.0.0.2"
LANGUAGES = ("en", "de", "fr")


def documents_site() -> SiteSpec:
    pages: dict[str, Page] = {
        "/": Page(title="index", links=("/en", "/de", "/fr", "/noindex-meta", "/noindex-header", "/notes.txt")),
        "/noindex-meta": Page(body=page("en", title="hidden", extra_head='<meta name="robots" content="noindex">')),
        "/noindex-header": Page(body=page("de", title="hidden too"), headers=(("X-Robots-Tag", "noindex"),)),
        "/notes.txt": Page(body="plain text, not HTML: archived, never a document", content_type="text/plain"),
    }
    for lang in LANGUAGES:
        pages[f"/{lang}"] = Page(body=page(lang, title=f"page {lang}"))
    return SiteSpec(hosts={HOST: HostSpec(pages=pages)})


async def _read_all(conn: KafkaConnection, topic: str) -> list[tuple[bytes, bytes]]:
    """Every (key, value) of ``topic`` up to its end offsets now, no consumer group."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from squall.tools.kafka_admin import topic_partition_counts

    parts = [TopicPartition(topic, p) for p in range((await topic_partition_counts(conn))[topic])]
    consumer = AIOKafkaConsumer(**conn.client_kwargs(), group_id=None, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        ends = await consumer.end_offsets(parts)
        out: list[tuple[bytes, bytes]] = []
        async def behind() -> bool:
            return any([await consumer.position(tp) < ends[tp] for tp in parts])

        while await behind():
            for tp, messages in (await consumer.getmany(timeout_ms=1000)).items():
                out += [(m.key or b"", m.value or b"") for m in messages if m.offset < ends[tp]]
        return out
    finally:
        await consumer.stop()


async def _send_again(conn: KafkaConnection, topic: str, messages: list[tuple[bytes, bytes]]) -> None:
    """Produce ``messages`` once more: what a re-delivered fetch sends after a crash."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(**conn.client_kwargs())
    await producer.start()
    try:
        await asyncio.gather(*[await producer.send(topic, key=k, value=v) for k, v in messages])
    finally:
        await producer.stop()


def squall(crawl: Crawl, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SQUALL_CONF=str(crawl.conf_path))
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    return subprocess.run([sys.executable, "-m", "squall.cli.main", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=180)


def warc_digests(paths: list[Path]) -> dict[str, list[str]]:
    """Target URI → the WARC-Payload-Digest of each of its response records (and checks each is its body's)."""
    out: dict[str, list[str]] = {}
    for path in paths:
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type == "response":
                    digest = rec.rec_headers.get_header("WARC-Payload-Digest")
                    assert digest == payload_digest(rec.content_stream().read())
                    out.setdefault(rec.rec_headers.get_header("WARC-Target-URI"), []).append(digest)
    return out


def test_each_fetched_html_page_gives_one_document_that_the_search_index_finds(site, crawl, tmp_path):
    served = site(documents_site())
    c = crawl(**{"documents.enabled": True, "fetcher.server.delay": 0.2,
                 "indexer.md.mapping": ["parse.title=page_title"]})
    c.start_worker()
    c.seed(served.seeds)
    c.wait_idle(timeout_s=240)
    base = served.seeds[0].rstrip("/")

    records = c.records()
    fetched = {u for u, r in records.items() if r["status"] == "FETCHED"}
    noindex = {f"{base}/noindex-meta", f"{base}/noindex-header"}
    assert fetched == {f"{base}/", *(f"{base}/{lang}" for lang in LANGUAGES), *noindex, f"{base}/notes.txt"}

    conn = KafkaConnection.from_settings(c.settings)
    topic = topic_name(c.settings, "documents")
    messages = asyncio.run(_read_all(conn, topic))
    docs = [Document.from_bytes(v) for _, v in messages]
    per_url = Counter(d.url for d in docs)
    # every FETCHED HTML page exactly once; the noindex pages and the plain-text file never
    assert per_url == Counter(fetched - noindex - {f"{base}/notes.txt"})
    by_url = {d.url: d for d in docs}
    for key, value in messages:  # keyed by the URL's partition key, like every message of the URL
        assert key.decode() == partition_key(Document.from_bytes(value).url, c.settings.partition_url_mode)
    for lang in LANGUAGES:
        doc = by_url[f"{base}/{lang}"]
        assert doc.language == lang, (lang, doc.language, doc.language_confidence)
        assert doc.language_confidence > 0
        assert UNIQUE[lang] in doc.text and "Menu item" not in doc.text
        assert doc.title == f"page {lang}" and doc.metadata == {"page_title": [f"page {lang}"]}
        assert doc.http_status == 200 and doc.content_type == "text/html" and doc.outlinks == 8

    # each digest is its WARC response record's WARC-Payload-Digest
    archived = warc_digests(c.warc_files())
    for doc in docs:
        assert archived[doc.url] == [doc.payload_digest], doc.url

    # the index: every document, found by a phrase only its page has
    index_dir = tmp_path / "index"
    run = squall(c, "index", "--dir", str(index_dir), "--until-idle", "2")
    assert run.returncode == 0, run.stderr
    assert f"{len(docs)} documents read" in run.stdout and f"{len(docs)} pages in the index" in run.stdout
    for lang in LANGUAGES:
        found = squall(c, "search", "--dir", str(index_dir), "--json", f'"{UNIQUE[lang]}"')
        assert found.returncode == 0, found.stderr
        hits = [json.loads(line) for line in found.stdout.splitlines()]
        assert [(h["url"], h["language"]) for h in hits] == [(f"{base}/{lang}", lang)]
    text = squall(c, "search", "--dir", str(index_dir), UNIQUE["en"])
    assert text.returncode == 0 and f"{base}/en" in text.stdout and "[en]" in text.stdout

    # re-delivered documents (a fetch repeated after a crash sends its document again) replace, never duplicate;
    # the indexer resumes from its committed offsets: it reads only what came after its last run
    asyncio.run(_send_again(conn, topic, messages))
    again = squall(c, "index", "--dir", str(index_dir), "--until-idle", "2")
    assert again.returncode == 0, again.stderr
    assert f"{len(docs)} documents read" in again.stdout and f"{len(docs)} pages in the index" in again.stdout
    found = squall(c, "search", "--dir", str(index_dir), "--json", f'"{UNIQUE["fr"]}"')
    assert len(found.stdout.splitlines()) == 1


def test_a_worker_killed_mid_crawl_leaves_one_indexed_document_per_fetched_page(site, crawl, tmp_path):
    from squall.tools.site_spec import generated_site

    hosts = ["127.0.0.2", "127.0.0.3"]
    served = site(generated_site(hosts, 12, disallow="/private/"))
    c = crawl(**{"documents.enabled": True, "fetcher.server.delay": 0.3, "kafka.session.timeout.secs": 6.0})
    c.start_worker("w1")
    c.seed(served.seeds)
    deadline = time.monotonic() + 120
    while len(served.requests()) < 12 and time.monotonic() < deadline:
        time.sleep(0.1)
    c.stop_worker("w1", kill=True)  # SIGKILL: fetches in flight are handed out and fetched again, documents resent
    c.start_worker("w1")
    c.wait_idle(timeout_s=300)

    records = c.records()
    fetched = {u for u, r in records.items() if r["status"] == "FETCHED"}
    assert fetched == served.server.expected_pages()
    conn = KafkaConnection.from_settings(c.settings)
    docs = [Document.from_bytes(v) for _, v in asyncio.run(_read_all(conn, topic_name(c.settings, "documents")))]
    assert {d.url for d in docs} == fetched  # every FETCHED page has a document (at least one: at-least-once)
    run = squall(c, "index", "--dir", str(tmp_path / "index"), "--until-idle", "2")
    assert run.returncode == 0, run.stderr
    assert f"{len(docs)} documents read" in run.stdout
    assert f"{len(fetched)} pages in the index" in run.stdout  # one per URL, however many copies were sent


def test_a_rendered_page_gives_the_document_of_its_dom_with_its_fetched_payload_digest(site, crawl, chromium):
    from squall.tools.site_spec import spa_host

    served = site(SiteSpec(hosts={HOST: spa_host({"/": ["/first-rendered-link", "/second-rendered-link"],
                                                  "/first-rendered-link": [], "/second-rendered-link": []})}))
    c = crawl(**{"documents.enabled": True, "render.enabled": True, "fetcher.server.delay": 0.3})
    c.start_worker()
    c.seed([served.url(HOST, "/")])
    c.wait_idle(timeout_s=240)

    conn = KafkaConnection.from_settings(c.settings)
    docs = {d.url: d for d in (Document.from_bytes(v) for _, v in asyncio.run(
        _read_all(conn, topic_name(c.settings, "documents"))))}
    root = docs[served.url(HOST, "/")]
    assert root.rendered and root.title == "spa /"
    # its links exist only in the rendered DOM: the document is the DOM's
    assert root.outlinks == 2 and "/second-rendered-link" in root.text
    assert set(docs) == {served.url(HOST, p) for p in ("/", "/first-rendered-link", "/second-rendered-link")}
    # the digest is the fetched page's, as in its WARC response record (the DOM is in a conversion record)
    archived = warc_digests(c.warc_files())
    assert all(archived[u] == [d.payload_digest] for u, d in docs.items())
