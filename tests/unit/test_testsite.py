"""Tests of squall.tools.testsite: a real loopback server with simulated hosts that records every request."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import aiohttp
import pytest
from multidict import CIMultiDict

from squall.policy.parse import parse_html
from squall.tools.site_spec import HostSpec, Page, RobotsSpec, SiteSpec, directory_site, generated_site, url
from squall.tools.testsite import RecordingServer

A, B = "127.0.0.2", "127.0.0.3"
UA = "squall-test/1.0"


async def get(session: aiohttp.ClientSession, u: str, **kwargs) -> tuple[int, CIMultiDict, bytes]:
    async with session.get(u, allow_redirects=False, headers={"User-Agent": UA, **kwargs.pop("headers", {})},
                           **kwargs) as resp:
        return resp.status, CIMultiDict(resp.headers), await resp.read()


@pytest.fixture
async def session():
    async with aiohttp.ClientSession() as s:
        yield s


def site(pages_a: dict, robots_a: RobotsSpec | None = None, pages_b: dict | None = None,
         robots_b: RobotsSpec | None = None) -> SiteSpec:
    return SiteSpec(hosts={A: HostSpec(pages=pages_a, robots=robots_a),
                           B: HostSpec(pages=pages_b or {}, robots=robots_b)})


# ---------------------------------------------------------------- recording

async def test_each_address_is_a_host_and_every_request_is_recorded(tmp_path, session):
    log = tmp_path / "requests.jsonl"
    spec = generated_site([A, B], 5)
    async with RecordingServer(spec, log_path=log) as server:
        before = time.time()
        status_a, _, body_a = await get(session, server.base_url(A) + "/")
        status_b, _, body_b = await get(session, server.base_url(B) + "/page/1?x=1")
        status_404, _, _ = await get(session, server.base_url(A) + "/missing")
        assert (status_a, status_b, status_404) == (200, 200, 404)
        assert b"host 0 index" in body_a and b"host 1 page 1" in body_b
        reqs = server.requests
        assert [(r["ip"], r["path"], r["status"]) for r in reqs] == [
            (A, "/", 200), (B, "/page/1?x=1", 200), (A, "/missing", 404)]
        assert reqs[0]["host"] == f"{A}:{server.port}"
        assert all(r["method"] == "GET" and r["ua"] == UA and before <= r["t"] <= time.time() for r in reqs)
        assert [r["path"] for r in server.requests_for(B)] == ["/page/1?x=1"]
        assert server.seeds == [f"http://{A}:{server.port}/", f"http://{B}:{server.port}/"]
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    assert logged == reqs
    assert set(logged[0]) == {"host", "ip", "path", "method", "t", "ua", "status", "if_none_match"}


async def test_a_request_is_timestamped_when_it_arrives_not_when_it_is_answered(session):
    spec = site({"/slow": Page(body="slow", delay_s=0.4)})
    async with RecordingServer(spec) as server:
        task = asyncio.create_task(get(session, server.base_url(A) + "/slow"))
        await asyncio.sleep(0.15)
        pending = server.requests
        assert [(r["path"], r["status"]) for r in pending] == [("/slow", None)]
        status, _, _ = await task
        done_at = time.time()
        (entry,) = server.requests
        assert (status, entry["status"]) == (200, 200)
        assert done_at - entry["t"] >= 0.35


async def test_a_given_port_is_used_on_every_address(session):
    async with RecordingServer(site({"/": Page(body="a")})) as first:
        port = first.port
    async with RecordingServer(site({"/": Page(body="a")}), port=port) as server:
        assert server.port == port
        assert (await get(session, f"http://{B}:{port}/"))[0] == 404  # B has no pages, but it listens


# ---------------------------------------------------------------- robots.txt

async def test_robots_status_sequence_then_text(session):
    spec = site({}, robots_a=RobotsSpec(text="User-agent: *\nDisallow: /x\n", statuses=(503, 503),
                                        retry_after="7"))
    async with RecordingServer(spec) as server:
        answers = [await get(session, server.base_url(A) + "/robots.txt") for _ in range(3)]
        no_robots = await get(session, server.base_url(B) + "/robots.txt")
    assert [a[0] for a in answers] == [503, 503, 200]
    assert answers[0][1]["Retry-After"] == "7"
    assert answers[2][2] == b"User-agent: *\nDisallow: /x\n"
    assert no_robots[0] == 404


async def test_robots_can_redirect_to_another_hosts_robots(session):
    spec = site({"/x": Page(body="x")}, robots_a=RobotsSpec(location=url(B, "/robots.txt")),
                robots_b=RobotsSpec(text="User-agent: *\nDisallow: /x\n"))
    async with RecordingServer(spec) as server:
        status, headers, _ = await get(session, server.base_url(A) + "/robots.txt")
        assert (status, headers["Location"]) == (301, f"http://{B}:{server.port}/robots.txt")
        assert f"http://{A}:{server.port}/x" in server.disallowed_pages()
        assert f"http://{A}:{server.port}/" in server.expected_pages()


async def test_a_persistent_5xx_robots_disallows_the_whole_host_in_the_replay():
    spec = site({"/": Page(body="a")}, robots_a=RobotsSpec(status=503), pages_b={"/": Page(body="b")})
    async with RecordingServer(spec) as server:
        assert server.expected_pages() == {f"http://{B}:{server.port}/"}
        assert f"http://{A}:{server.port}/" in server.disallowed_pages()


# ---------------------------------------------------------------- page behaviours

@pytest.mark.parametrize("status", [404, 410, 500, 503])
async def test_fixed_statuses(session, status):
    async with RecordingServer(site({"/p": Page(status=status)})) as server:
        assert (await get(session, server.base_url(A) + "/p"))[0] == status


async def test_status_sequence_and_retry_after(session):
    spec = site({"/flaky": Page(body="ok now", statuses=(503, 503), retry_after="2")})
    async with RecordingServer(spec) as server:
        answers = [await get(session, server.base_url(A) + "/flaky") for _ in range(3)]
    assert [a[0] for a in answers] == [503, 503, 200]
    assert answers[0][1]["Retry-After"] == "2"
    assert answers[2][2] == b"ok now"


async def test_redirects_carry_the_real_port(session):
    spec = site({"/old": Page.redirect(url(B, "/new")), "/tmp": Page.redirect("/here", status=302)})
    async with RecordingServer(spec) as server:
        s1, h1, _ = await get(session, server.base_url(A) + "/old")
        s2, h2, _ = await get(session, server.base_url(A) + "/tmp")
    assert (s1, h1["Location"]) == (301, f"http://{B}:{server.port}/new")
    assert (s2, h2["Location"]) == (302, "/here")


async def test_conditional_requests_get_304(session):
    lm = "Wed, 21 Oct 2015 07:28:00 GMT"
    spec = site({"/e": Page(body="etagged", etag='"v1"', last_modified=lm)})
    async with RecordingServer(spec) as server:
        u = server.base_url(A) + "/e"
        first = await get(session, u)
        match = await get(session, u, headers={"If-None-Match": '"v0", "v1"'})
        weak = await get(session, u, headers={"If-None-Match": 'W/"v1"'})
        changed = await get(session, u, headers={"If-None-Match": '"v2"', "If-Modified-Since": lm})
        since = await get(session, u, headers={"If-Modified-Since": "Thu, 22 Oct 2015 00:00:00 GMT"})
        older = await get(session, u, headers={"If-Modified-Since": "Tue, 20 Oct 2015 00:00:00 GMT"})
    assert (first[0], first[1]["ETag"], first[1]["Last-Modified"]) == (200, '"v1"', lm)
    assert [match[0], weak[0], changed[0], since[0], older[0]] == [304, 304, 200, 304, 200]
    assert match[2] == b""


async def test_the_calendar_is_infinite_and_generated_on_the_fly(session):
    async with RecordingServer(site({"/cal": Page(calendar=True)})) as server:
        u = server.base_url(A) + "/cal?d=2024-02-28"
        status, headers, body = await get(session, u)
        bad = await get(session, server.base_url(A) + "/cal?d=not-a-date")
    assert status == 200
    links = parse_html(body, url=u, headers=headers, content_type=headers["Content-Type"]).outlinks
    assert links == (f"http://{A}:{server.port}/cal?d=2024-02-27", f"http://{A}:{server.port}/cal?d=2024-02-29")
    assert bad[0] == 404


async def test_the_gzip_bomb_is_small_on_the_wire_and_huge_decoded():
    async with RecordingServer(site({"/bomb": Page(gzip_bomb_mb=8)})) as server:
        async with aiohttp.ClientSession(auto_decompress=False) as raw:
            async with raw.get(server.base_url(A) + "/bomb") as resp:
                wire = await resp.read()
                encoding = resp.headers["Content-Encoding"]
    assert encoding == "gzip"
    assert len(wire) < 100_000
    decoded = zlib.decompress(wire, zlib.MAX_WBITS | 16)
    assert decoded == b"\0" * (8 << 20)


async def test_a_callable_page_is_computed_per_request(session):
    def echo(request):
        return Page(body=f"you asked for {request.query.get('q')}", content_type="text/plain")

    async def async_page(request):
        await asyncio.sleep(0)
        return Page(status=410)

    async with RecordingServer(site({"/echo": echo, "/gone": async_page})) as server:
        status, headers, body = await get(session, server.base_url(A) + "/echo?q=zz")
        gone = await get(session, server.base_url(A) + "/gone")
    assert (status, body, headers["Content-Type"]) == (200, b"you asked for zz", "text/plain")
    assert gone[0] == 410


# ---------------------------------------------------------------- generated site and replay

async def test_expected_pages_are_reachable_allowed_and_never_disallowed(session):
    spec = generated_site([A, B], 10, seed=3)
    async with RecordingServer(spec) as server:
        expected = server.expected_pages()
        disallowed = server.disallowed_pages()
        base_a, base_b = server.base_url(A), server.base_url(B)
        assert not expected & disallowed
        assert {f"{b}/page/{i}" for b in (base_a, base_b) for i in range(10)} <= expected
        assert {f"{base_a}/", f"{base_b}/", f"{base_a}/meta-nofollow"} <= expected
        assert {f"{base_a}/private/secret-0", f"{base_b}/private/secret-1"} <= disallowed
        # only reachable through rel=nofollow or a meta-nofollow page
        assert f"{base_a}/nofollow-target" not in expected
        assert f"{base_a}/meta-target" not in expected
        # every expected page answers 200, and disallowed pages exist and are linked from the index
        for u in sorted(expected):
            assert (await get(session, u))[0] == 200, u
        _, headers, index = await get(session, base_a + "/")
        links = parse_html(index, url=base_a + "/", headers=headers, content_type=headers["Content-Type"]).outlinks
        assert f"{base_a}/private/secret-0" in links
        assert (await get(session, f"{base_a}/private/secret-0"))[0] == 200
        _, _, robots = await get(session, base_a + "/robots.txt")
        assert robots == b"User-agent: *\nDisallow: /private/\n"


def test_generated_site_is_deterministic_for_a_seed_and_has_cross_links():
    one, two = generated_site([A, B], 8, seed=5), generated_site([A, B], 8, seed=5)
    assert one == two
    cross = [link for page in one.hosts[A].pages.values() for link in page.links if link.startswith("http")]
    assert cross and all(link.startswith(f"http://{B}:") for link in cross)
    none = generated_site([A, B], 8, cross_links=False, disallow=None)
    assert not [link for page in none.hosts[A].pages.values() for link in page.links if link.startswith("http")]
    assert not any(p.startswith("/private/") for p in none.hosts[A].pages)


async def test_without_disallow_nothing_is_disallowed():
    async with RecordingServer(generated_site([A], 3, disallow=None)) as server:
        assert server.disallowed_pages() == set()
        assert len(server.expected_pages()) == 5  # index, 3 pages, meta-nofollow


async def test_redirect_targets_and_error_pages_are_expected_but_traps_are_not_followed():
    spec = site({"/": Page(links=("/moved", "/gone", "/cal?d=2020-01-01"), title="i"),
                 "/moved": Page.redirect("/target"), "/target": Page(title="t"),
                 "/gone": Page(status=410), "/cal": Page(calendar=True)})
    async with RecordingServer(spec) as server:
        b = server.base_url(A)
        assert server.expected_pages() == {f"{b}/", f"{b}/moved", f"{b}/target", f"{b}/gone",
                                           f"{b}/cal?d=2020-01-01", f"{server.base_url(B)}/"}


# ---------------------------------------------------------------- directory site

async def test_directory_site_serves_files_with_types_and_robots(tmp_path, session):
    (tmp_path / "sub").mkdir()
    (tmp_path / "index.html").write_text('<a href="sub/">sub</a><a href="style.css">css</a>')
    (tmp_path / "sub" / "index.html").write_text("<title>sub</title>")
    (tmp_path / "style.css").write_text("p {}")
    (tmp_path / "robots.txt").write_text("User-agent: *\nDisallow: /style.css\n")
    async with RecordingServer(directory_site(tmp_path, A)) as server:
        b = server.base_url(A)
        root = await get(session, b + "/")
        sub = await get(session, b + "/sub/")
        sub_redirect = await get(session, b + "/sub")
        css = await get(session, b + "/style.css")
        robots = await get(session, b + "/robots.txt")
        assert server.expected_pages() == {f"{b}/", f"{b}/sub/"}
        assert f"{b}/style.css" in server.disallowed_pages()
    assert (root[0], root[1]["Content-Type"]) == (200, "text/html; charset=utf-8")
    assert sub[2] == b"<title>sub</title>"
    assert (sub_redirect[0], sub_redirect[1]["Location"]) == (301, "/sub/")
    assert css[1]["Content-Type"].startswith("text/css")
    assert robots[2] == b"User-agent: *\nDisallow: /style.css\n"


async def test_directory_site_without_robots_answers_404(tmp_path, session):
    (tmp_path / "index.html").write_text("hi")
    async with RecordingServer(directory_site(tmp_path, A)) as server:
        assert (await get(session, server.base_url(A) + "/robots.txt"))[0] == 404


# ---------------------------------------------------------------- command line

async def test_the_cli_prints_seeds_serves_and_stops_on_sigterm(tmp_path, session):
    log = tmp_path / "cli.jsonl"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-m", "squall.tools.testsite", "--hosts", f"{A},{B}", "--pages", "4",
                             "--port", "0", "--log", str(log)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 30)
        info = json.loads(line)
        assert info["seeds"] == [f"http://{A}:{info['port']}/", f"http://{B}:{info['port']}/"]
        assert info["log"] == str(log)
        assert f"http://{A}:{info['port']}/private/secret-0" in info["disallowed"]
        assert (await get(session, info["seeds"][1]))[0] == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = await asyncio.to_thread(proc.wait, 30)
    assert rc == 0
    (entry,) = [json.loads(x) for x in log.read_text().splitlines()]
    assert (entry["ip"], entry["path"], entry["status"]) == (B, "/", 200)


async def test_robots_with_an_etag_answers_a_matching_if_none_match_with_304(session):
    robots = RobotsSpec(text="User-agent: *\nDisallow: /x\n", etag='"v1"')
    async with RecordingServer(site({}, robots)) as server:
        status, headers, body = await get(session, server.base_url(A) + "/robots.txt")
        assert (status, headers["ETag"], body) == (200, '"v1"', b"User-agent: *\nDisallow: /x\n")
        status, _, body = await get(session, server.base_url(A) + "/robots.txt", headers={"If-None-Match": '"v1"'})
        assert (status, body) == (304, b"")
        status, _, _ = await get(session, server.base_url(A) + "/robots.txt", headers={"If-None-Match": '"v0"'})
        assert status == 200
        assert [r["if_none_match"] for r in server.requests] == [None, '"v1"', '"v0"']
