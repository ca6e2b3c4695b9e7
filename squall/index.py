"""The embedded full-text index of a crawl: the documents topic read into a local tantivy index.

:class:`SearchIndex` wraps one tantivy index directory (``index.dir``): one
document per URL (:meth:`SearchIndex.put` deletes any earlier document of the
URL before adding, so a document delivered twice — at-least-once, e.g. after
a worker was killed before its fetch was acknowledged — replaces itself),
and :meth:`SearchIndex.search` returns ranked :class:`Hit` s with a snippet.

:func:`consume` reads ``<topology.id>-documents`` with the consumer group
``<topology.id>-index``: every partition assigned to this one reader (a
tantivy index has one writer), resumed from the group's committed offsets
(none yet: from the oldest message). It commits the index, then the offsets,
at least every ``index.commit.interval.secs`` while documents arrive and
when it stops: a crash repeats at most that much work, and repeating is
harmless. A message that is not a document is counted and skipped.

Schema: ``url`` (raw, one term: the key of :meth:`SearchIndex.put`),
``title`` and ``text`` (tantivy's default tokenizer: split on
non-alphanumeric characters, lower-cased — Unicode-aware, so German and
French words are whole), ``language``, ``description``, ``fetched_at_s``,
``payload_digest`` and ``simhash`` (stored).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tantivy

from squall.errors import KafkaSetupError, MessageError, SearchIndexError
from squall.net.kafka_security import KafkaConnection
from squall.policy.documents import Document

__all__ = ["Hit", "IndexStats", "SearchIndex", "consume", "group_id"]

log = logging.getLogger("squall.index")
SNIPPET_CHARS = 200  # characters of text around the best-matching terms shown per hit
WRITER_HEAP_BYTES = 50_000_000  # tantivy writer memory (bytes) before it flushes a segment on its own
_SEARCH_FIELDS = ["title", "text"]


@dataclass(frozen=True)
class Hit:
    """One search result: BM25 ``score``, the page's fields and a ``snippet`` (matches in ``[...]``)."""

    score: float
    url: str
    title: str
    language: str
    snippet: str


@dataclass
class IndexStats:
    """What :func:`consume` did: documents put, messages skipped (not documents), commits made."""

    indexed: int = 0
    skipped: int = 0
    commits: int = 0


def group_id(topology_id: str) -> str:
    """The consumer group of ``squall index``: ``<topology.id>-index``."""
    return f"{topology_id}-index"


def _schema() -> tantivy.Schema:
    b = tantivy.SchemaBuilder()
    b.add_text_field("url", stored=True, tokenizer_name="raw")
    b.add_text_field("title", stored=True)
    b.add_text_field("text", stored=True)
    b.add_text_field("language", stored=True, tokenizer_name="raw")
    b.add_text_field("description", stored=True)
    b.add_float_field("fetched_at_s", stored=True)
    b.add_text_field("payload_digest", stored=True, tokenizer_name="raw")
    b.add_text_field("simhash", stored=True, tokenizer_name="raw")
    return b.build()


class SearchIndex:
    """A tantivy index in ``directory`` (created if missing); ``writable`` opens its single writer.

    Raises:
        SearchIndexError: the directory holds no index of this schema, or its writer is locked by another process.
    """

    def __init__(self, directory: Path | str, *, writable: bool = False) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            self._index = tantivy.Index(_schema(), path=str(self.directory), reuse=True)
            self._writer = self._index.writer(WRITER_HEAP_BYTES, 1) if writable else None
        except (OSError, ValueError) as exc:
            raise SearchIndexError(f"cannot open the index at {self.directory}: {exc}") from None
        self.pending = 0  # documents put since the last commit

    def put(self, doc: Document) -> None:
        """Add ``doc``, replacing any document of the same URL (visible after :meth:`commit`)."""
        assert self._writer is not None, "opened read-only"
        self._writer.delete_documents_by_term("url", doc.url)
        self._writer.add_document(
            tantivy.Document(
                url=doc.url,
                title=doc.title or "",
                text=doc.text,
                language=doc.language,
                description=doc.description or "",
                fetched_at_s=float(doc.fetched_at_s),
                payload_digest=doc.payload_digest,
                simhash=doc.simhash,
            )
        )
        self.pending += 1

    def commit(self) -> None:
        """Make every put durable and visible."""
        if self._writer is not None:
            self._writer.commit()  # segment merges go on in the writer's background threads
        self.pending = 0

    def close(self) -> None:
        """Commit and release the writer's lock; idempotent."""
        if self._writer is not None:
            self._writer.commit()
            self._writer.wait_merging_threads()
            self._writer = None

    def count(self) -> int:
        """Documents in the last committed state."""
        self._index.reload()
        return int(self._index.searcher().num_docs)

    def search(self, query: str, limit: int = 10) -> list[Hit]:
        """The best ``limit`` matches of ``query`` in title and text, best first.

        ``query``: tantivy's query language; every word must match unless
        ``OR`` says otherwise; ``"..."`` is an exact phrase. A query the parser
        cannot read is read leniently (its unreadable parts match nothing).
        """
        self._index.reload()
        searcher = self._index.searcher()
        try:
            parsed = self._index.parse_query(query, _SEARCH_FIELDS, conjunction_by_default=True)
        except ValueError:
            parsed, _errors = self._index.parse_query_lenient(query, _SEARCH_FIELDS, conjunction_by_default=True)
        result = searcher.search(parsed, limit)
        snippets = tantivy.SnippetGenerator.create(searcher, parsed, self._index.schema, "text")
        snippets.set_max_num_chars(SNIPPET_CHARS)
        hits = []
        for score, address in result.hits:
            stored = searcher.doc(address)
            hits.append(
                Hit(
                    score=float(score),
                    url=_field(stored, "url"),
                    title=_field(stored, "title"),
                    language=_field(stored, "language"),
                    snippet=_snippet(snippets.snippet_from_doc(stored)) or _field(stored, "text")[:SNIPPET_CHARS],
                )
            )
        return hits


def _field(stored: Any, name: str) -> str:
    values = stored.get_all(name)
    return str(values[0]) if values else ""


def _snippet(snippet: Any) -> str:
    """The fragment with each highlighted range in ``[...]``, white space collapsed."""
    raw = snippet.fragment().encode("utf-8")  # the highlighted ranges are byte offsets into the UTF-8 text
    out, at = [], 0
    for r in snippet.highlighted():
        out += [raw[at : r.start], b"[", raw[r.start : r.end], b"]"]
        at = r.end
    out.append(raw[at:])
    return " ".join(b"".join(out).decode("utf-8", "replace").split())


async def consume(
    conn: KafkaConnection,
    topic: str,
    group: str,
    index: SearchIndex,
    *,
    commit_interval_s: float,
    idle_s: float = 0.0,
    on_commit: Callable[[IndexStats], None] | None = None,
    on_document: Callable[[Document], None] | None = None,
) -> IndexStats:
    """Read ``topic`` into ``index`` from the committed offsets of ``group``; returns what was done.

    Runs until cancelled, or — ``idle_s`` > 0 — until every partition is read
    to its end and no message came for ``idle_s`` seconds. The index is
    committed before the offsets (see the module docstring), every
    ``commit_interval_s`` seconds while messages arrive and at the end.
    ``on_commit`` is called after each index commit, ``on_document`` with
    each document put.

    Raises:
        KafkaSetupError: the topic does not exist or no broker answers.
    """
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from squall.tools.kafka_admin import topic_partition_counts

    counts = await topic_partition_counts(conn)
    if topic not in counts:
        raise KafkaSetupError(f"topic {topic} does not exist (has a worker of this topology.id started?)")
    consumer = AIOKafkaConsumer(
        **conn.client_kwargs(), group_id=group, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    partitions = [TopicPartition(topic, p) for p in range(counts[topic])]
    stats = IndexStats()
    try:
        await consumer.start()
    except Exception as exc:
        with contextlib.suppress(Exception):
            await consumer.stop()
        raise KafkaSetupError(f"cannot read {topic} at {conn.bootstrap}: {exc}") from exc
    consumer.assign(partitions)  # one reader per index: every partition, no rebalance to wait for

    def commit_index() -> None:
        index.commit()
        stats.commits += 1
        if on_commit is not None:
            on_commit(stats)

    try:
        last_commit = last_message = time.monotonic()
        while True:
            batch = await consumer.getmany(timeout_ms=500, max_records=1000)
            for messages in batch.values():
                for m in messages:
                    try:
                        doc = Document.from_bytes(m.value or b"")
                    except MessageError as exc:
                        stats.skipped += 1
                        log.warning("squall index: skipped %s[%d]@%d: %s", m.topic, m.partition, m.offset, exc)
                        continue
                    index.put(doc)
                    stats.indexed += 1
                    if on_document is not None:
                        on_document(doc)
            now = time.monotonic()
            if batch:
                last_message = now
            if index.pending and now - last_commit >= commit_interval_s:
                await asyncio.to_thread(commit_index)
                await consumer.commit()
                last_commit = now
            if idle_s and not batch and now - last_message >= idle_s and await _at_end(consumer, partitions):
                break
    finally:
        with contextlib.suppress(Exception):
            await asyncio.to_thread(commit_index)
            await consumer.commit()  # offsets only after the index holds what they cover
        await consumer.stop()
    return stats


async def _at_end(consumer: Any, partitions: list) -> bool:
    ends = await consumer.end_offsets(partitions)
    for tp in partitions:
        if await consumer.position(tp) < ends[tp]:
            return False
    return True
