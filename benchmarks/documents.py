"""Micro-benchmark of the documents step: CPU milliseconds per page, on a 12 KB HTML page.

Runs the code :func:`agents.documents.emit` runs for one FETCHED page, minus
the produce call: the noindex decision, the text extraction (Resiliparse:
main text, description, links, language), the document (simhash, mapping)
and its JSON encoding. The page is the same on every call, so the simhash's
word-hash cache finds every word; a row beside it empties the cache first
(a page whose words were never seen). The parse step the fetcher runs anyway
(:func:`squall.policy.parse.parse_html`) and the payload digest
(:func:`squall.net.warc.payload_digest`, shared with the WARC record) are
timed beside it for scale. CPU time of this process (``time.process_time``),
the median of ``--rounds`` rounds of ``--pages`` pages. A benchmark:
nothing asserted. Run::

    .venv/bin/python benchmarks/documents.py [--pages 2000] [--rounds 5] [--size 12000]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def page_html(size: int) -> bytes:
    """An English page of about ``size`` bytes: a 40-link navigation, an article of paragraphs, a footer."""
    from tests.unit.texts import ENGLISH

    sentences = [s.strip() for s in ENGLISH.replace("\n", " ").split(". ") if s.strip()]
    nav = "".join(f'<li><a href="/section/{i}">Section {i}</a></li>' for i in range(40))
    head = (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>The lighthouse on the cape</title>'
        '<meta name="description" content="A village and its lighthouse">'
        '<link rel="canonical" href="/lighthouse"></head>'
        f"<body><header><nav><ul>{nav}</ul></nav></header><main><article><h1>The lighthouse</h1>"
    )
    tail = "</article></main><footer><p>Copyright 2026, the village council.</p></footer></body></html>"
    paragraphs: list[str] = []
    i = 0
    while len(head) + sum(map(len, paragraphs)) + len(tail) < size:
        paragraphs.append(f"<p>{sentences[i % len(sentences)]} ({i}).</p>")
        i += 1
    return (head + "".join(paragraphs) + tail).encode()


def cpu_ms_per_page(step: Callable[[], object], pages: int, rounds: int) -> float:
    """Median over ``rounds`` of the CPU ms one call of ``step`` takes (``pages`` calls per round)."""
    step()  # warm-up: imports, caches
    samples = []
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(pages):
            step()
        samples.append((time.process_time() - start) * 1000.0 / pages)
    return statistics.median(samples)


def cold_simhash(dp: ModuleType, text: str) -> int:
    """simhash64 of ``text`` with the word-hash cache emptied first: every word hashed, as on a new vocabulary."""
    dp._word_hash.cache_clear()
    return dp.simhash64(text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--pages", type=int, default=2000, help="pages per round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--size", type=int, default=12000, help="bytes of the page")
    args = p.parse_args(argv)

    from squall.net.warc import payload_digest
    from squall.policy import documents as dp
    from squall.policy.metadata import parse_mapping
    from squall.policy.parse import parse_html

    body = page_html(args.size)
    url = "http://bench.test/lighthouse"
    headers = [("Content-Type", "text/html; charset=utf-8")]
    parsed = parse_html(body, url=url, headers=headers, agent_token="squall")
    recorded = {"parse.charset": [parsed.charset], "parse.title": [parsed.title or ""]}
    config = dp.DocumentsConfig(100000, parse_mapping(["parse.title=page_title"]), "squall")
    digest = payload_digest(body)

    def document_of(page: dp.PageText) -> dp.Document:
        return dp.build(
            url=url,
            fetched_at_s=1.0,
            http_status=200,
            content_type="text/html",
            recorded=recorded,
            page=page,
            payload_digest=digest,
            metadata={},
            rendered=False,
            config=config,
        )

    def documents_step() -> bytes:
        if dp.noindex_reason(headers, recorded, config.agent_token) is not None:
            return b""
        return document_of(dp.extract(body, "utf-8")).to_bytes()

    page = dp.extract(body, "utf-8")
    document = document_of(page)
    load = os.getloadavg()[0]
    rows = [
        ("documents step (noindex, extract, build, JSON)", cpu_ms_per_page(documents_step, args.pages, args.rounds)),
        ("  of which extract (Resiliparse)", cpu_ms_per_page(lambda: dp.extract(body), args.pages, args.rounds)),
        ("  of which simhash64", cpu_ms_per_page(lambda: dp.simhash64(page.text), args.pages, args.rounds)),
        (
            "  simhash64 of a page of words not seen before",
            cpu_ms_per_page(lambda: cold_simhash(dp, page.text), args.pages, args.rounds),
        ),
        ("  of which the JSON of the document", cpu_ms_per_page(document.to_bytes, args.pages, args.rounds)),
        (
            "parse step, for scale (parse_html)",
            cpu_ms_per_page(lambda: parse_html(body, url=url, headers=headers), args.pages, args.rounds),
        ),
        ("payload digest (shared with WARC)", cpu_ms_per_page(lambda: payload_digest(body), args.pages, args.rounds)),
    ]
    print(
        f"documents micro-benchmark: {len(body)} B page, {len(page.text)} chars of main text, "
        f"language {page.language}; {args.rounds} rounds x {args.pages} pages; "
        f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores, "
        f"load average {load:.2f} at the start"
    )
    width = max(len(name) for name, _ in rows)
    print(f"{'step':<{width}}  CPU ms/page")
    print(f"{'-' * width}  -----------")
    for name, ms in rows:
        print(f"{name:<{width}}  {ms:11.3f}")
    print("documents.enabled false: the step is one attribute test (no import of Resiliparse, no work)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
