"""The demo's checks: the crawl's records and WARC files against the site's own request log.

Each check is a :class:`Check` (a name, pass or fail, a line for people).
What the site should have been asked for is replayed from the site itself
with the crawler's link parser and robots.txt rules
(:meth:`squall.tools.testsite.RecordingServer.expected_pages`); the gap
between two requests to one host is compared with ``fetcher.server.delay``
(seconds); the WARC files must be readable by ``warcio index``.
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from squall.tools.demo_site import ServedSite
from squall.tools.site_spec import Page, SiteSpec

# A directory with more HTML files than this is not replayed (too slow to be
# a useful expectation); the demo then checks the crawl against itself.
REPLAY_MAX_HTML_FILES = 20000
GAP_TOLERANCE_S = 0.002  # clock granularity between the worker's pacing and the server's arrival stamps


@dataclass
class Check:
    """One check the demo prints as ``[PASS] name: detail`` or ``[FAIL] name: detail``."""

    name: str
    ok: bool
    detail: str


def _sample(items: Any, n: int = 5) -> str:
    items = sorted(items)
    more = f" … (+{len(items) - n})" if len(items) > n else ""
    return ", ".join(map(str, items[:n])) + more


def _with_status(records: dict[str, dict[str, Any]], urls: set[str]) -> list[str]:
    out = []
    for u in urls:
        rec = records.get(u)
        out.append(
            f"{u} ({rec.get('status')} {rec.get('reason') or ''})".replace(" )", ")") if rec else f"{u} (no record)"
        )
    return out


def _page_kind(spec: SiteSpec, u: str) -> str:
    """'page' (served 200), 'redirect', 'missing' (404) or 'other' for a URL of the site."""
    parts = urlsplit(u)
    host = spec.hosts.get(parts.hostname or "")
    if host is None:
        return "other"
    path = parts.path + ("?" + parts.query if parts.query else "")
    page = host.pages.get(path) or host.pages.get(parts.path)
    if page is None:
        return "missing"
    if not isinstance(page, Page):
        return "other"
    if page.location is not None:
        return "redirect"
    return "page" if page.status == 200 and not page.statuses else "other"


def _warcio() -> list[str] | None:
    exe = Path(sys.executable).parent / "warcio"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("warcio")
    return [found] if found else None


def warc_index(paths: list[Path]) -> tuple[bool, collections.Counter[str], str]:
    """Run ``warcio index`` on ``paths``: (exit status 0, counts by WARC-Type, error text)."""
    cmd = _warcio()
    if cmd is None:
        return False, collections.Counter(), "warcio is not installed"
    proc = subprocess.run([*cmd, "index", *map(str, paths)], capture_output=True, text=True)
    types: collections.Counter[str] = collections.Counter()
    for line in proc.stdout.splitlines():
        try:
            types[json.loads(line).get("warc-type", "?")] += 1
        except ValueError:
            types["(unparsable line)"] += 1
    return proc.returncode == 0, types, proc.stderr.strip()[-2000:]


def site_checks(
    args: argparse.Namespace,
    spec: SiteSpec,
    served: ServedSite,
    records: dict[str, dict[str, Any]],
    delay: float,
    warcs: list[Path],
) -> list[Check]:
    """The checks of the crawl against the site's request log: expected pages, robots.txt, gaps, WARC.

    ``args``: the demo's arguments (``args.site``: a served directory, else the
    generated site); ``records``: the latest URL records (URL → record dict);
    ``delay``: ``fetcher.server.delay`` in seconds; ``warcs``: the crawl's WARC files.
    """
    checks: list[Check] = []
    server = served.server
    requested = served.page_requests()
    twice = {u: n for u, n in requested.items() if n > 1}
    fetched_urls = {u for u, r in records.items() if r.get("status") == "FETCHED"}
    html_files = sum(1 for h in spec.hosts.values() for p in h.pages if p.endswith((".html", "/")))
    replay = not args.site or html_files <= REPLAY_MAX_HTML_FILES

    if replay:
        t = time.monotonic()
        expected = server.expected_pages()
        disallowed = server.disallowed_pages()
        took = time.monotonic() - t
        # A linked URL the site does not serve (404) or redirects is expected to be requested, not FETCHED.
        kinds = {u: _page_kind(spec, u) for u in expected}
        expect_fetched = {u for u, k in kinds.items() if k == "page"}
        not_pages = collections.Counter(k for k in kinds.values() if k != "page")
        how = (
            "replayed from the index" if args.site else "replayed from each host's /"
        ) + f" with the crawler's link parser and robots rules in {took:.1f} s"
        checks.append(
            Check(
                "expected pages",
                bool(expect_fetched),
                f"{len(expected)} URLs reachable and allowed ({how})"
                + (
                    f"; of them {dict(not_pages)} not served as pages (requested, not FETCHED): "
                    f"{_sample(u for u, k in kinds.items() if k != 'page')}"
                    if not_pages
                    else ""
                ),
            )
        )
        missing = expected - set(requested)
        extra = set(requested) - expected
        checks.append(
            Check(
                "every expected URL requested",
                not missing,
                f"{len(expected) - len(missing)}/{len(expected)}"
                + (f"; never requested: {_sample(missing)}" if missing else ""),
            )
        )
        checks.append(
            Check(
                "nothing else requested",
                not extra,
                "no request outside the expected set" if not extra else f"{len(extra)} unexpected: {_sample(extra)}",
            )
        )
        checks.append(
            Check(
                "each URL requested exactly once",
                not twice,
                f"{len(requested)} URLs, {sum(requested.values())} requests"
                + (f"; repeated: {_sample(f'{u} ×{n}' for u, n in twice.items())}" if twice else ""),
            )
        )
        not_fetched = expect_fetched - fetched_urls
        other_fetched = fetched_urls - expect_fetched
        checks.append(
            Check(
                "every expected page FETCHED",
                not not_fetched and not other_fetched,
                f"{len(expect_fetched & fetched_urls)}/{len(expect_fetched)} FETCHED"
                + (f"; not FETCHED: {_sample(_with_status(records, not_fetched))}" if not_fetched else "")
                + (f"; FETCHED but not expected: {_sample(other_fetched)}" if other_fetched else ""),
            )
        )
        once = [u for u in expect_fetched & fetched_urls if records[u].get("attempts", 1) != 1]
        checks.append(
            Check(
                "fetched in one attempt",
                not once,
                "every FETCHED record has attempts=1" if not once else f"several attempts: {_sample(once)}",
            )
        )
        if disallowed:
            hit = disallowed & set(requested)
            denied = {u for u, r in records.items() if r.get("reason") == "robots.denied"}
            checks.append(
                Check(
                    "disallowed pages never requested",
                    not hit,
                    f"{len(disallowed)} disallowed URLs, {len(hit)} requested"
                    + (f": {_sample(hit)}" if hit else "")
                    + f"; {len(denied & disallowed)} recorded ERROR robots.denied",
                )
            )
        else:
            checks.append(
                Check(
                    "disallowed pages never requested",
                    True,
                    "nothing to check: the site's robots.txt disallows nothing (see --disallow)",
                )
            )
    else:
        checks.append(
            Check(
                "expected pages",
                True,
                f"not replayed ({html_files} HTML files > {REPLAY_MAX_HTML_FILES}): checking the crawl "
                "against the request log instead",
            )
        )
        unrequested = {u for u in fetched_urls if requested.get(u, 0) == 0}
        checks.append(
            Check(
                "every FETCHED URL requested exactly once",
                not unrequested and not twice,
                f"{len(fetched_urls)} FETCHED"
                + (f"; FETCHED without a request: {_sample(unrequested)}" if unrequested else "")
                + (f"; repeated: {_sample(f'{u} ×{n}' for u, n in twice.items())}" if twice else ""),
            )
        )
        checks.append(
            Check("nothing requested twice", not twice, f"{sum(requested.values())} requests, {len(requested)} URLs")
        )

    # robots.txt: once per host (one fetch, then cached).
    robots_n = collections.Counter(r["ip"] for r in served.requests() if r["path"] == "/robots.txt")
    bad_robots = {ip: robots_n.get(ip, 0) for ip in spec.hosts if robots_n.get(ip, 0) != 1}
    checks.append(
        Check(
            "robots.txt fetched once per host",
            not bad_robots,
            "1 request per host" if not bad_robots else f"requests per host: {bad_robots}",
        )
    )

    # Politeness: the gap between two request arrivals on one host (robots.txt included).
    gaps = {ip: served.min_gap(ip) for ip in spec.hosts}
    slow = {ip: g for ip, (g, _n) in gaps.items() if g < delay - GAP_TOLERANCE_S}
    shown = ", ".join(f"{ip} {g:.3f} s ({n} req)" for ip, (g, n) in sorted(gaps.items()) if n > 1) or "n/a"
    checks.append(Check(f"min gap per host >= fetcher.server.delay {delay:g} s", not slow, shown))

    # WARC: readable by warcio index; one response record per answered page request (robots.txt is not archived).
    if not warcs:
        checks.append(Check("WARC files", False, "no *.warc.gz written"))
    else:
        ok, types, err = warc_index(warcs)
        answered = sum(1 for r in served.requests() if r["path"] != "/robots.txt" and r["status"] is not None)
        detail = (
            f"`warcio index` on {len(warcs)} file(s): exit {'0' if ok else 'non-zero'}, "
            f"records {dict(types)}; {types.get('response', 0)} response records for {answered} answered "
            "page requests"
        )
        if err and not ok:
            detail += f"; stderr: {err}"
        checks.append(Check("WARC readable by warcio index", ok and types.get("response", 0) == answered, detail))
    return checks


def audit_check(audit: dict[str, Any], requests: list[dict[str, Any]]) -> Check:
    """The crawler's own politeness audit: every request the site received audited, no violation."""
    detail = (
        f"{audit['requests']} requests audited for {len(requests)} received, {audit['violations']} violations "
        f"({audit['inside_block']} inside a Retry-After/back-off block)"
    )
    return Check(
        "politeness audit (squall audit)", audit["violations"] == 0 and audit["requests"] == len(requests), detail
    )
