"""Micro-benchmark of the sitemap parse step: squall.policy.sitemaps.read_sitemap + listed_statuses on one file.

The parse step runs inside the fetcher's event loop (like the HTML parser),
so its time is time the loop does not serve other fetches. Measured on
generated files of ``--entries`` URLs (default 50 000, the sitemaps.org
maximum): an XML urlset with lastmod / changefreq / priority, the same
gzipped, and a text sitemap. Each case runs ``--repeat`` times; the table
shows the best run (read = bytes → entries; listed = entries → canonical
DISCOVERED messages). A benchmark, not a test: nothing is asserted. Run::

    .venv/bin/python benchmarks/sitemaps.py [--entries 50000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gzip
import platform
import time

from squall.policy.sitemaps import LEVEL_KEY, SITEMAP_KEY, SitemapConfig, listed_statuses, read_sitemap
from squall.policy.urls import NormalizerConfig
from squall.settings import load_settings


def _files(n: int) -> dict[str, tuple[bytes, str]]:
    rows = "".join(
        f"<url><loc>https://shop.example/item/{i}?colour=red</loc><lastmod>2024-04-30T12:00:00Z</lastmod>"
        f"<changefreq>weekly</changefreq><priority>0.{i % 10}</priority></url>\n"
        for i in range(n)
    )
    xml = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
        + rows
        + "</urlset>\n"
    ).encode()
    text = "".join(f"https://shop.example/item/{i}?colour=red\n" for i in range(n)).encode()
    return {
        "xml urlset": (xml, "application/xml"),
        "xml urlset, gzip": (gzip.compress(xml), "application/gzip"),
        "text": (text, "text/plain"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=50000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    settings = load_settings(overrides={"http.content.limit": 100 * 1024 * 1024})
    config = SitemapConfig.from_settings(settings)
    normalizer = NormalizerConfig.from_settings(settings)
    print(
        f"| file | entries | bytes | read | listed | entries/s | ({platform.python_implementation()} "
        f"{platform.python_version()}, {platform.machine()})"
    )
    print("|---|---|---|---|---|---|")
    for name, (body, content_type) in _files(args.entries).items():
        best_read = best_listed = float("inf")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            doc = read_sitemap(
                body,
                content_type=content_type,
                truncated=False,
                max_urls=config.max_urls,
                content_limit=config.content_limit,
            )
            t1 = time.perf_counter()
            _, out = listed_statuses(
                doc,
                sitemap_url="https://shop.example/sitemap.xml",
                depth=0,
                metadata={SITEMAP_KEY: ["true"], LEVEL_KEY: ["0"]},
                inherited={},
                now_s=time.time(),
                config=config,
                normalizer=normalizer,
            )
            t2 = time.perf_counter()
            assert len(out) == args.entries and doc.error is None, (name, doc.error, len(out))
            best_read, best_listed = min(best_read, t1 - t0), min(best_listed, t2 - t1)
        total = best_read + best_listed
        print(
            f"| {name} | {args.entries} | {len(body)} | {best_read * 1000:.0f} ms | {best_listed * 1000:.0f} ms | "
            f"{args.entries / total:,.0f} |"
        )


if __name__ == "__main__":
    main()
