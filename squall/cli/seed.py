"""``squall seed FILE|-``: put seed URLs on the status topic.

Input: one URL per line; blank lines and lines starting with ``#`` are
skipped; optional metadata follows the URL as tab-separated ``key=value``
pairs (StormCrawler's FileSpout format). Each valid line becomes the JSON
status message ``{"url": ..., "seed": true, "metadata": {...}}`` keyed by
the URL's partition key (Kafka's default murmur2 partitioner). A malformed
line is reported with its line number and reason; the rest are seeded.
Exit code 0 if every line was seeded, 1 if some were rejected, 2 if the file
cannot be read (or another error stops it before anything is sent).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from squall.errors import InvalidURL
from squall.policy.partition import partition_key
from squall.policy.records import StatusMessage
from squall.policy.topics import topic_name
from squall.policy.urls import NormalizerConfig, canonicalize

PROGRESS_EVERY = 1000  # seeds between two progress updates
_USERINFO = re.compile(r"//[^/?#\\]*@")


@dataclass(frozen=True)
class SeedLine:
    """A parsed line: ``lineno`` (1-based), the canonical ``url``, its ``metadata``; or ``error``."""

    lineno: int
    url: str | None = None
    metadata: dict[str, list[str]] | None = None
    error: str | None = None


def parse_seed_lines(lines: Iterable[str], normalizer: NormalizerConfig) -> Iterator[SeedLine]:
    """Parse seed lines; never raises: bad lines come back with ``error`` set."""
    for lineno, raw in enumerate(lines, start=1):
        line = raw.lstrip("\ufeff").strip()  # a UTF-8 byte-order mark before the first URL is not part of it
        if not line or line.startswith("#"):
            continue
        url, *pairs = line.split("\t")
        metadata: dict[str, list[str]] = {}
        bad = next((p for p in pairs if "=" not in p or not p.split("=", 1)[0].strip()), None)
        if bad is not None:
            yield SeedLine(lineno, error=f"metadata {bad!r} is not key=value")
            continue
        for pair in pairs:
            k, v = pair.split("=", 1)
            metadata.setdefault(k.strip(), []).append(v)
        try:
            yield SeedLine(lineno, url=canonicalize(url, normalizer, seed=True), metadata=metadata)
        except InvalidURL as exc:
            hint = f": {exc.detail}" if exc.detail else ""
            shown = _USERINFO.sub("//***@", url)  # never echo a credential into logs
            yield SeedLine(lineno, error=f"invalid URL {shown!r}: {exc.reason}{hint}")


async def produce_seeds(settings, seeds: list[SeedLine], progress: Callable[[int], None] | None = None) -> int:
    """Create the topics if needed and send ``seeds`` to the status topic; returns the count sent.

    ``progress(n)`` is called with the number of seeds handed to the producer so far (every
    :data:`PROGRESS_EVERY` seeds and at the end).
    """
    from aiokafka import AIOKafkaProducer

    from squall.net.kafka_security import KafkaConnection, refusals
    from squall.policy.topics import all_topics
    from squall.tools.kafka_admin import ensure_topics

    conn = KafkaConnection.from_settings(settings)
    await ensure_topics(conn, all_topics(settings), settings.topology_replication_factor)
    producer = AIOKafkaProducer(**conn.client_kwargs(), acks="all")
    async with refusals(conn):  # an ACL that does not let this user write the status topic: one line
        await producer.start()
    try:
        topic = topic_name(settings, "status")
        mode = settings.partition_url_mode
        # a send only queues the record: its delivery (or the broker's refusal, e.g. an ACL) is the future's
        pending: list[asyncio.Future[Any]] = []
        for n, seed in enumerate(seeds, start=1):
            assert seed.url is not None
            msg = StatusMessage(url=seed.url, seed=True, metadata=seed.metadata or {})
            async with refusals(conn):
                pending.append(
                    await producer.send(topic, key=partition_key(seed.url, mode).encode(), value=msg.to_bytes())
                )
                if len(pending) >= PROGRESS_EVERY:
                    await _delivered(pending)
            if progress is not None and n % PROGRESS_EVERY == 0:
                progress(n)
        async with refusals(conn):
            await producer.flush()
            await _delivered(pending)
        if progress is not None:
            progress(len(seeds))
    finally:
        await producer.stop()
    return len(seeds)


async def _delivered(pending: list[asyncio.Future[Any]]) -> None:
    """Wait for every queued send of ``pending`` (then emptied); raise the first failure, retrieving all."""
    results = await asyncio.gather(*pending, return_exceptions=True)
    pending.clear()
    for result in results:
        if isinstance(result, BaseException):
            raise result


def _seed_command(args: argparse.Namespace) -> int:
    from squall.settings import load_settings

    settings = load_settings(args.conf)
    normalizer = NormalizerConfig.from_settings(settings)
    try:
        stream = sys.stdin if args.file == "-" else open(args.file, encoding="utf-8", errors="replace")  # noqa: SIM115
    except OSError as exc:  # missing, a directory, unreadable: one line, not a traceback
        print(f"squall seed: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    with stream:
        parsed = list(parse_seed_lines(stream, normalizer))
    good = [s for s in parsed if s.error is None]
    bad = [s for s in parsed if s.error is not None]
    for s in bad:
        print(f"squall seed: line {s.lineno}: {s.error} (skipped)", file=sys.stderr)
    sent = _send_with_progress(settings, good) if good else 0
    print(f"squall seed: {sent} URL(s) sent to {topic_name(settings, 'status')}, {len(bad)} line(s) rejected")
    return 1 if bad else 0


def _send_with_progress(settings, seeds: list[SeedLine]) -> int:
    """Send ``seeds`` with a progress bar on standard error when it is a terminal (rich)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    console = Console(stderr=True)
    columns = (TextColumn("squall seed"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, disable=not console.is_terminal or len(seeds) < PROGRESS_EVERY) as bar:
        task = bar.add_task("seeding", total=len(seeds))
        return asyncio.run(produce_seeds(settings, seeds, progress=lambda n: bar.update(task, completed=n)))


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("seed", help="send seed URLs (one per line) to the status topic")
    p.add_argument("file", help="file of URLs, one per line, or - for standard input")
    p.set_defaults(func=_seed_command)
