"""Tests of squall.net.warc: records, headers matching the stored body, rotation, warcio compatibility."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator

from squall.net import warc
from squall.net.warc import WarcWriter, payload_digest

WARCIO = Path(sys.executable).parent / "warcio"
FIXED_NOW_S = 1_700_000_000.25  # 2023-11-14T22:13:20.25Z
NAME = re.compile(r"^crawl-\d{14}-\d{5}\.warc\.gz$")


def fetch(writer: WarcWriter, url: str = "http://127.0.0.2:8080/a?x=1", **overrides):
    kwargs = dict(
        request_headers=[("User-Agent", "squall/0.1"), ("Accept-Encoding", "gzip")],
        status=200,
        reason="OK",
        response_headers=[
            ("Content-Type", "text/html; charset=utf-8"),
            ("Content-Encoding", "gzip"),
            ("Content-Length", "31"),
            ("ETag", '"v1"'),
        ],
        body=b"<html><body>hello</body></html>" * 4,
        ip="127.0.0.2",
        fetched_at_s=FIXED_NOW_S,
        truncated=False,
    )
    kwargs.update(overrides)
    return writer.write_fetch(url, **kwargs)


def records(path: Path) -> list:
    out = []
    with open(path, "rb") as fh:
        for rec in ArchiveIterator(fh):
            out.append((rec.rec_type, rec.rec_headers, rec.http_headers, rec.content_stream().read()))
    return out


def warcio_index(path: Path) -> list[dict]:
    proc = subprocess.run([str(WARCIO), "index", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def test_a_fetch_becomes_a_response_and_a_request_record_after_a_warcinfo(tmp_path):
    with WarcWriter(tmp_path, "crawl", 10_000_000, clock=lambda: FIXED_NOW_S) as writer:
        path = fetch(writer)
    assert NAME.match(path.name)
    assert path.name == "crawl-20231114221320-00000.warc.gz"
    recs = records(path)
    assert [r[0] for r in recs] == ["warcinfo", "response", "request"]
    _, resp_warc, resp_http, body = recs[1]
    _, req_warc, req_http, _ = recs[2]
    assert resp_warc.get_header("WARC-Target-URI") == "http://127.0.0.2:8080/a?x=1"
    assert resp_warc.get_header("WARC-IP-Address") == "127.0.0.2"
    assert resp_warc.get_header("WARC-Date") == "2023-11-14T22:13:20.250000Z"
    assert resp_warc.protocol == "WARC/1.1"
    assert resp_warc.get_header("WARC-Truncated") is None
    assert resp_warc.get_header("WARC-Concurrent-To") == req_warc.get_header("WARC-Record-ID")
    assert req_warc.get_header("WARC-Concurrent-To") == resp_warc.get_header("WARC-Record-ID")
    assert resp_http.get_statuscode() == "200"
    assert body == b"<html><body>hello</body></html>" * 4
    assert req_http.protocol == "GET"
    assert req_http.statusline == "/a?x=1 HTTP/1.1"
    assert req_http.get_header("User-Agent") == "squall/0.1"
    assert req_http.get_header("Host") == "127.0.0.2:8080"


def test_response_headers_describe_the_decoded_body_and_keep_the_originals(tmp_path):
    body = b"x" * 1234
    with WarcWriter(tmp_path, "crawl", 10_000_000) as writer:
        path = fetch(
            writer,
            body=body,
            response_headers=[
                ("Content-Type", "text/html"),
                ("content-encoding", "gzip"),
                ("Transfer-Encoding", "chunked"),
                ("Content-Length", "99"),
                ("Set-Cookie", "a=1"),
                ("Set-Cookie", "b=2"),
            ],
        )
    _, _, http, stored = records(path)[1]
    assert stored == body
    assert http.get_header("Content-Encoding") is None
    assert http.get_header("Transfer-Encoding") is None
    assert [v for k, v in http.headers if k.lower() == "content-length"] == ["1234"]
    assert http.get_header("X-Squall-Original-Content-Encoding") == "gzip"
    assert http.get_header("X-Squall-Original-Transfer-Encoding") == "chunked"
    assert http.get_header("X-Squall-Original-Content-Length") == "99"
    assert [v for k, v in http.headers if k == "Set-Cookie"] == ["a=1", "b=2"]


def test_a_truncated_body_is_marked_warc_truncated_length(tmp_path):
    with WarcWriter(tmp_path, "crawl", 10_000_000) as writer:
        path = fetch(writer, truncated=True, body=b"partial")
    _, warc, http, body = records(path)[1]
    assert warc.get_header("WARC-Truncated") == "length"
    assert (body, http.get_header("Content-Length")) == (b"partial", "7")


def test_no_ip_leaves_out_warc_ip_address_and_an_empty_reason_gets_the_standard_phrase(tmp_path):
    with WarcWriter(tmp_path, "crawl", 10_000_000) as writer:
        path = fetch(writer, ip=None, status=404, reason="", body=b"")
    _, warc, http, body = records(path)[1]
    assert warc.get_header("WARC-IP-Address") is None
    assert http.statusline == "404 Not Found"
    assert body == b""


def test_header_values_with_newlines_cannot_break_the_record(tmp_path):
    with WarcWriter(tmp_path, "crawl", 10_000_000) as writer:
        path = fetch(writer, response_headers=[("X-Evil", "a\r\nWARC-Type: fake")], reason="O\nK")
    recs = records(path)
    assert [r[0] for r in recs] == ["warcinfo", "response", "request"]
    assert recs[1][2].get_header("X-Evil") == "a WARC-Type: fake"


def test_warcio_index_reads_every_record(tmp_path):
    with WarcWriter(tmp_path, "crawl", 10_000_000) as writer:
        fetch(writer, url="http://127.0.0.2:8080/one")
        path = fetch(
            writer,
            url="http://127.0.0.3:8080/two",
            status=301,
            reason="Moved Permanently",
            response_headers=[("Location", "/three")],
            body=b"",
        )
    index = warcio_index(path)
    assert [(r["warc-type"], r.get("warc-target-uri")) for r in index] == [
        ("warcinfo", None),
        ("response", "http://127.0.0.2:8080/one"),
        ("request", "http://127.0.0.2:8080/one"),
        ("response", "http://127.0.0.3:8080/two"),
        ("request", "http://127.0.0.3:8080/two"),
    ]


def test_warcio_check_validates_the_digests_of_every_record_kind(tmp_path):
    body = "<html><body>héllo</body></html>".encode()
    with WarcWriter(tmp_path, "crawl", 10_000_000) as writer:
        fetch(writer, body=body)
        writer.write_revisit(
            "http://127.0.0.2:8080/a?x=1",
            request_headers=[],
            status=200,
            reason="",
            response_headers=[],
            body_length=len(body),
            ip=None,
            fetched_at_s=FIXED_NOW_S + 5,
            payload_digest=payload_digest(body),
            refers_to_date_s=FIXED_NOW_S,
        )
        path = writer.write_conversion(
            "http://127.0.0.2:8080/a?x=1",
            body=b"<html>dom</html>",
            content_type="text/html",
            fetched_at_s=FIXED_NOW_S,
            converted_at_s=FIXED_NOW_S + 1,
        )
    proc = subprocess.run([str(WARCIO), "check", "-v", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # six records; warcio checks the digests of all but the revisit (a block without its payload)
    assert proc.stdout.count("digest pass") == 5 and "fail" not in proc.stdout, proc.stdout


_KILLED_WRITER = """
import os, signal, sys
from pathlib import Path
from squall.net.warc import WarcWriter
writer = WarcWriter(Path(sys.argv[1]), "crawl", 0)
for i in range(3):
    writer.write_fetch(f"http://127.0.0.2:8080/{i}", request_headers=[], status=200, reason="", response_headers=[],
                       body=b"x" * 5000, ip=None, fetched_at_s=1.7e9 + i, truncated=False)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_writer_killed_after_a_fetch_leaves_every_record_of_it_readable(tmp_path):
    proc = subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(tmp_path)], capture_output=True, timeout=60)
    assert proc.returncode == -9, proc.stderr  # killed, never closed
    [path] = tmp_path.iterdir()
    kinds = [(kind, headers.get_header("WARC-Target-URI")) for kind, headers, _, _ in records(path)]
    assert kinds == [("warcinfo", None)] + [
        (kind, f"http://127.0.0.2:8080/{i}") for i in range(3) for kind in ("response", "request")
    ]


def test_files_rotate_once_they_pass_the_size_limit(tmp_path):
    with WarcWriter(tmp_path, "crawl", 1500, clock=lambda: FIXED_NOW_S) as writer:
        written = [fetch(writer, url=f"http://127.0.0.2:8080/{i}", body=bytes(range(256)) * 4) for i in range(6)]
        paths = writer.paths
    assert len(paths) > 1
    assert [p.name for p in paths] == [f"crawl-20231114221320-{i:05d}.warc.gz" for i in range(len(paths))]
    assert set(written) == set(paths)
    for p in paths[:-1]:
        assert p.stat().st_size >= 1500
    urls = []
    for p in paths:
        kinds = [r["warc-type"] for r in warcio_index(p)]
        assert kinds[0] == "warcinfo"
        urls += [r["warc-target-uri"] for r in warcio_index(p) if r["warc-type"] == "response"]
    assert urls == [f"http://127.0.0.2:8080/{i}" for i in range(6)]


def test_a_zero_size_limit_never_rotates(tmp_path):
    with WarcWriter(tmp_path, "crawl", 0) as writer:
        for i in range(5):
            fetch(writer, url=f"http://127.0.0.2:8080/{i}")
    assert len(writer.paths) == 1


def test_an_existing_file_name_is_never_overwritten(tmp_path):
    taken = tmp_path / "crawl-20231114221320-00000.warc.gz"
    taken.write_bytes(b"someone else's")
    with WarcWriter(tmp_path, "crawl", 10_000_000, clock=lambda: FIXED_NOW_S) as writer:
        path = fetch(writer)
    assert path.name == "crawl-20231114221320-00001.warc.gz"
    assert taken.read_bytes() == b"someone else's"


def test_warc_1_0_is_available(tmp_path):
    with WarcWriter(tmp_path, "crawl", 10_000_000, warc_version="1.0") as writer:
        path = fetch(writer)
    _, warc, _, _ = records(path)[1]
    assert warc.protocol == "WARC/1.0"
    assert warc.get_header("WARC-Date") == "2023-11-14T22:13:20Z"


def test_writing_after_close_raises_and_close_is_idempotent(tmp_path):
    writer = WarcWriter(tmp_path / "sub" / "dir", "crawl", 10_000_000)
    fetch(writer)
    writer.close()
    writer.close()
    with pytest.raises(ValueError):
        fetch(writer)
    assert writer.paths[0].parent == tmp_path / "sub" / "dir"


def test_a_bad_warc_version_is_refused(tmp_path):
    with pytest.raises(ValueError):
        WarcWriter(tmp_path, "crawl", 1, warc_version="2.0")


def test_a_rendered_dom_is_a_conversion_record_referring_to_its_response_record(tmp_path):
    with WarcWriter(tmp_path, "crawl", 0, clock=lambda: FIXED_NOW_S) as writer:
        fetch(writer)
        fetch(writer, url="http://127.0.0.2:8080/other")
        path = writer.write_conversion(
            "http://127.0.0.2:8080/a?x=1",
            body=b"<html>rendered</html>",
            content_type="text/html; charset=utf-8",
            fetched_at_s=FIXED_NOW_S,
            converted_at_s=FIXED_NOW_S + 2,
        )
    recs = records(path)
    response = next(h for t, h, _, _ in recs if t == "response" and h.get_header("WARC-Target-URI").endswith("x=1"))
    kind, headers, _, body = recs[-1]
    assert (kind, body) == ("conversion", b"<html>rendered</html>")
    assert headers.get_header("WARC-Refers-To") == response.get_header("WARC-Record-ID")
    assert headers.get_header("WARC-Refers-To-Target-URI") == "http://127.0.0.2:8080/a?x=1"
    assert headers.get_header("WARC-Refers-To-Date") == response.get_header("WARC-Date")
    assert headers.get_header("Content-Type") == "text/html; charset=utf-8"
    assert headers.get_header("WARC-Date") == "2023-11-14T22:13:22.250000Z"
    subprocess.run([str(WARCIO), "check", str(path)], check=True, capture_output=True)


def test_a_conversion_of_an_unknown_response_still_names_its_target_uri_and_date(tmp_path):
    with WarcWriter(tmp_path, "crawl", 0, clock=lambda: FIXED_NOW_S) as writer:
        path = writer.write_conversion(
            "http://127.0.0.2:8080/gone",
            body=b"<html></html>",
            content_type="text/html",
            fetched_at_s=FIXED_NOW_S,
            converted_at_s=FIXED_NOW_S,
        )
    _, headers, _, _ = records(path)[-1]
    assert headers.get_header("WARC-Refers-To") is None
    assert headers.get_header("WARC-Refers-To-Target-URI") == "http://127.0.0.2:8080/gone"


def test_the_payload_digest_is_warcios_and_a_given_one_is_written_as_is(tmp_path):
    body = b"<html><body>digest me</body></html>"
    with WarcWriter(tmp_path, "crawl", 10_000_000, clock=lambda: FIXED_NOW_S) as writer:
        computed = fetch(writer, url="http://127.0.0.2:8080/computed", body=body)
        given = fetch(writer, url="http://127.0.0.2:8080/given", body=body, payload_digest=payload_digest(body))
    assert computed == given
    responses = [r for r in records(computed) if r[0] == "response"]
    digests = [r[1].get_header("WARC-Payload-Digest") for r in responses]
    assert digests == [payload_digest(body), payload_digest(body)]
    assert payload_digest(body).startswith("sha1:") and len(payload_digest(body)) == 5 + 32
    # warcio's own check of the archive agrees with the digest written without computing it
    proc = subprocess.run([str(WARCIO), "check", str(computed)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_an_unchanged_payload_becomes_a_revisit_record_that_warcio_indexes(tmp_path):
    body = b"<html><body>same as before</body></html>"
    url = "http://127.0.0.2:8080/same"
    with WarcWriter(tmp_path, "crawl", 10_000_000, clock=lambda: FIXED_NOW_S) as writer:
        path = fetch(writer, url=url, body=body)
        writer.write_revisit(
            url,
            request_headers=[("User-Agent", "squall/0.1")],
            status=200,
            reason="OK",
            response_headers=[("Content-Type", "text/html"), ("Content-Encoding", "gzip")],
            body_length=len(body),
            ip="127.0.0.2",
            fetched_at_s=FIXED_NOW_S + 86400,
            payload_digest=payload_digest(body),
            refers_to_date_s=FIXED_NOW_S,
        )
    recs = records(path)
    assert [r[0] for r in recs] == ["warcinfo", "response", "request", "revisit", "request"]
    _, rev_warc, rev_http, rev_body = recs[3]
    assert rev_warc.get_header("WARC-Profile") == "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
    assert rev_warc.get_header("WARC-Refers-To-Target-URI") == url
    assert rev_warc.get_header("WARC-Refers-To-Date") == recs[1][1].get_header("WARC-Date")
    assert rev_warc.get_header("WARC-Payload-Digest") == recs[1][1].get_header("WARC-Payload-Digest")
    assert rev_warc.get_header("WARC-Date") == "2023-11-15T22:13:20.250000Z"
    assert rev_http.get_statuscode() == "200" and rev_body == b""
    assert rev_http.get_header("X-Squall-Original-Content-Encoding") == "gzip"
    index = warcio_index(path)
    assert [e["warc-type"] for e in index] == ["warcinfo", "response", "request", "revisit", "request"]


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab :;/=\r\n\t\x0b\x1c\x85\xa0\u2028é")), max_size=12))
@example("text/html; charset=utf-8")
@example(" a")
@example("a  b")
def test_a_header_part_without_odd_whitespace_is_kept_as_it_is_and_any_other_cleaned_as_before(text: str) -> None:
    """_clean's shortcut for text whose only whitespace is single inner spaces: what the long way gives."""
    assert warc._clean(text) == " ".join(text.replace("\r", " ").replace("\n", " ").split())
    assert "\r" not in warc._clean(text) and "\n" not in warc._clean(text)


_FIELD_NAMES = ["WARC-Concurrent-To", "WARC-IP-Address", "WARC-Target-URI", "WARC-Payload-Digest", "Content-Type"]


def _fastwarc_record(version: str, kind: str, record_id: str, headers: list[tuple[str, str]], block: bytes) -> bytes:
    """The same record made by FastWARC's ``WarcRecord.write`` (what squall's archive wrote before), uncompressed."""
    import io

    from fastwarc import warc as fw

    record = fw.WarcRecord()
    record.init_headers(getattr(fw, kind), record_id[5:-1].encode("ascii"))  # FastWARC adds "<urn:" and ">"
    if version != "1.1":
        record.headers.status_line = "WARC/" + version
    for name, value in headers:
        (record.headers.set if name == "WARC-Date" else record.headers.append)(name, value)
    record.headers.append("WARC-Block-Digest", payload_digest(block))
    record.set_bytes_content(block)
    out = io.BytesIO()
    record.write(out, checksum_data=False)
    return out.getvalue()


@settings(max_examples=300, deadline=None)
@given(
    version=st.sampled_from(["1.0", "1.1"]),
    kind=st.sampled_from(["response", "request", "revisit", "conversion", "warcinfo"]),
    fields=st.lists(
        st.tuples(st.sampled_from(_FIELD_NAMES), st.text(max_size=40).map(warc._clean)),  # values as the writer cleans them
        max_size=6,
    ),
    block=st.binary(max_size=3000),
)
@example(version="1.1", kind="response", fields=[("WARC-Target-URI", "http://例え.テスト/ü?q=ä")], block=b"")
def test_a_record_is_byte_for_byte_what_fastwarc_writes_of_the_same_fields(
    tmp_path_factory: pytest.TempPathFactory, version: str, kind: str, fields: list[tuple[str, str]], block: bytes
) -> None:
    import gzip

    directory = tmp_path_factory.mktemp("warc")
    writer = WarcWriter(directory, "t", 0, warc_version=version, clock=lambda: 1_700_000_000.0)
    record_id = "<urn:uuid:12345678-1234-4567-89ab-0123456789ab>"
    headers = [("WARC-Date", "2023-11-14T22:13:20Z"), *fields]
    with writer:
        writer._open_if_needed()
        with writer._lock:
            writer._write(kind, record_id, headers, block)
    members = gzip.decompress(writer.paths[0].read_bytes())
    assert members.endswith(_fastwarc_record(version, kind, record_id, headers, block))
