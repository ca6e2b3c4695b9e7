"""A real crawl through the broker: every page once, robots obeyed, hosts paced, WARC written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from squall.tools.site_spec import generated_site

HOSTS = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
DELAY_S = 0.4


def test_a_multi_host_site_is_crawled_once_per_page_politely_and_archived(site, crawl):
    served = site(generated_site(HOSTS, 12, disallow="/private/"))
    c = crawl(**{"fetcher.server.delay": DELAY_S})
    c.start_worker()
    assert c.seed(served.seeds) == len(HOSTS)
    report = c.wait_idle(timeout_s=240)

    requested = served.page_requests()
    expected = served.server.expected_pages()
    disallowed = served.server.disallowed_pages()
    assert disallowed, "the site must have disallowed pages for this test to mean anything"
    assert set(requested) == expected
    assert all(n == 1 for n in requested.values()), {u: n for u, n in requested.items() if n > 1}
    assert not disallowed & set(requested)
    for ip in HOSTS:
        # every request to a host, robots.txt included, starts >= fetcher.server.delay after the previous one
        assert served.min_gap(ip) >= DELAY_S, (ip, served.start_times(ip))
        assert sum(1 for r in served.requests() if r["ip"] == ip and r["path"] == "/robots.txt") == 1

    records = c.records()
    # every page of the site is FETCHED exactly once; disallowed pages end as ERROR robots.denied
    assert {u for u, r in records.items() if r["status"] == "FETCHED"} == expected
    assert all(records[u]["attempts"] == 1 for u in expected)
    assert {u for u, r in records.items() if r.get("reason") == "robots.denied"} == disallowed
    assert report.by_status["FETCHED"] == len(expected)

    warcs = c.warc_files()
    assert warcs
    index = subprocess.run([str(Path(sys.executable).parent / "warcio"), "index", *map(str, warcs)],
                           capture_output=True, text=True, check=True).stdout
    assert index.count('"warc-type": "response"') == sum(requested.values())  # pages; robots.txt is not archived
