"""Tests of ``squall sitemap check``: a file or one loopback URL, each entry admitted or refused with a reason."""

from __future__ import annotations

import gzip
import http.server
import io
import threading
from collections.abc import Iterator

import pytest

from squall.settings import load_settings
from squall.cli.sitemap import run_check

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
SITEMAP = (f'<urlset {NS}><url><loc>https://shop.example/a</loc><changefreq>daily</changefreq></url>'
           "<url><loc>https://shop.example/q/r/q/r/q/r/q/r</loc></url><url><loc>https://other.example/x</loc></url>"
           "<url><loc>ftp://shop.example/f</loc></url><url><loc>/relative</loc></url></urlset>").encode()


def check(source: str, **kw) -> tuple[int, list[str]]:
    out = io.StringIO()
    kw.setdefault("seeded", [])
    kw.setdefault("depth", 0)
    kw.setdefault("sitemap_url", None)
    kw.setdefault("content_type", None)
    code = run_check(source, load_settings(overrides={}), out=out, **kw)
    return code, out.getvalue().splitlines()


def test_a_file_prints_what_it_admits_and_why_it_refuses_the_rest(tmp_path):
    path = tmp_path / "sitemap.xml"
    path.write_bytes(SITEMAP)
    code, lines = check(str(path), sitemap_url="https://shop.example/sitemap.xml")
    assert code == 0
    assert lines == [
        "admit https://shop.example/a priority=0 changefreq=daily",
        "refuse https://shop.example/q/r/q/r/q/r/q/r trap.repeated_run",
        "refuse https://other.example/x scope.host",
        "refuse ftp://shop.example/f url.scheme",
        "admit https://shop.example/relative priority=0",
        "urlset: 2 admitted, 0 sitemaps, 3 refused",
    ]


def test_a_gzipped_index_file_lists_its_child_sitemaps(tmp_path):
    path = tmp_path / "index.xml.gz"
    path.write_bytes(gzip.compress(f"<sitemapindex {NS}><sitemap><loc>https://shop.example/s1.xml</loc></sitemap>"
                                   "</sitemapindex>".encode()))
    code, lines = check(str(path), seeded=["shop.example"])
    assert code == 0 and lines == ["sitemap https://shop.example/s1.xml level=1",
                                   "index: 0 admitted, 1 sitemaps, 0 refused"]


def test_a_broken_file_exits_1_with_its_reason_and_a_missing_one_2(tmp_path):
    path = tmp_path / "broken.xml"
    path.write_bytes(b"<html><body>not a sitemap</body></html>")
    assert check(str(path)) == (1, ["error: sitemap.wrong_type", "unreadable: 0 admitted, 0 sitemaps, 0 refused"])
    assert check(str(tmp_path / "missing.xml"))[0] == 2


class _Handler(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (stdlib name)
        self.hits.append(self.path)
        body = b"http://127.0.0.1/one\nhttp://127.0.0.1/two\n" if self.path == "/s.txt" else b"gone"
        self.send_response(200 if self.path == "/s.txt" else 404)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def loopback() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_loopback_url_is_fetched_once_and_its_host_counts_as_seeded(loopback):
    _Handler.hits.clear()
    code, lines = check(loopback + "/s.txt")
    assert code == 0 and _Handler.hits == ["/s.txt"]
    assert lines == ["admit http://127.0.0.1/one priority=0", "admit http://127.0.0.1/two priority=0",
                     "text: 2 admitted, 0 sitemaps, 0 refused"]
    assert check(loopback + "/missing.xml")[0] == 2


def test_a_url_that_is_not_loopback_is_never_fetched():
    assert check("https://www.example.com/sitemap.xml")[0] == 2
