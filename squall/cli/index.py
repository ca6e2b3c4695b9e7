"""``squall index`` and ``squall search``: the crawl's documents in a local full-text index, and queries over it.

``squall index`` reads ``<topology.id>-documents`` into the tantivy index at
``index.dir`` (:mod:`squall.index`), from its consumer group's committed
offsets, until stopped (Ctrl-C commits and stops) or, with ``--until-idle
SECS``, once every partition is read to its end and SECS passed without a
document. ``squall search QUERY`` prints the best matches: title, language,
URL and a snippet with the matching words in ``[...]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from squall.index import Hit


def _index_command(args: argparse.Namespace) -> int:
    from squall.index import SearchIndex, consume, group_id
    from squall.net.kafka_security import KafkaConnection
    from squall.policy.topics import topic_name
    from squall.settings import load_settings

    settings = load_settings(args.conf)
    directory = Path(args.dir or settings.index_dir)
    index = SearchIndex(directory, writable=True)
    topic = topic_name(settings, "documents")
    try:
        stats = asyncio.run(
            consume(
                KafkaConnection.from_settings(settings),
                topic,
                group_id(settings.topology_id),
                index,
                commit_interval_s=settings.index_commit_interval_secs,
                idle_s=args.until_idle,
            )
        )
    finally:
        index.close()
    print(
        f"squall index: {stats.indexed} documents read from {topic} ({stats.skipped} skipped); "
        f"{index.count()} pages in the index at {directory}"
    )
    return 0


def _search_command(args: argparse.Namespace) -> int:
    from squall.index import SearchIndex
    from squall.settings import load_settings

    settings = load_settings(args.conf)
    hits = SearchIndex(Path(args.dir or settings.index_dir)).search(args.query, args.limit)
    if args.json:
        for hit in hits:
            print(json.dumps(asdict(hit), ensure_ascii=False))
        return 0 if hits else 1
    if not hits:
        print(f"squall search: no page matches {args.query!r}", file=sys.stderr)
        return 1
    for line in format_hits(hits):
        print(line)
    return 0


def format_hits(hits: list[Hit]) -> list[str]:
    """The lines ``squall search`` prints: rank, title, language and score; the URL; the snippet."""
    lines = []
    for rank, hit in enumerate(hits, 1):
        lines += [
            f"{rank}. {hit.title or '(no title)'}  [{hit.language}]  score {hit.score:.2f}",
            f"   {hit.url}",
            f"   {hit.snippet}",
        ]
    return lines


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("index", help="read the documents topic into the local full-text index (index.dir)")
    p.add_argument("--dir", default=None, help="the index directory (default: index.dir)")
    p.add_argument(
        "--until-idle",
        type=float,
        default=0.0,
        metavar="SECS",
        help="stop once every partition is read and SECS passed without a document (0 = run until Ctrl-C)",
    )
    p.set_defaults(func=_index_command)

    s = subparsers.add_parser("search", help="search the local full-text index of the crawl")
    s.add_argument("query", help='words that must all match; "an exact phrase" in quotes; OR between alternatives')
    s.add_argument("--limit", type=int, default=10, help="matches shown (default 10)")
    s.add_argument("--dir", default=None, help="the index directory (default: index.dir)")
    s.add_argument(
        "--json", action="store_true", help="one JSON object per match (score, url, title, language, snippet)"
    )
    s.set_defaults(func=_search_command)
