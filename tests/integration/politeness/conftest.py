"""The two crawls the politeness tests measure, each started once for the whole package (tests/integration/politeness).

Each is one configuration with several simulated hosts (one behaviour per host,
a few pages each), shared by the tests of every module here so the suite stays
short on a 2-core CI box:

* ``polite`` (robots pacing off, ``fetcher.max.crawl.delay`` 3, no force):
  Crawl-delay 2 and 0.5, a Crawl-delay over the cap, disallowed paths,
  robots.txt 503 → 200, robots.txt 404 and 403, a redirected robots.txt,
  Retry-After 5 and headerless 429s, per-agent Crawl-delays in one group
  (robots agent ``squallbot``).
* ``forced`` (``fetcher.max.crawl.delay`` 1 with force, robots pacing on):
  local cap in the fetcher, pacing at the requested whole seconds in the
  frontier; then signals are re-delivered through the broker to check that
  the queue regulator is idempotent.

Every gap is measured between request *arrivals* at the server, robots.txt
included (the fetcher waits the queue delay after robots.txt too), and only
lower bounds are asserted: politeness, not speed (docs/architecture.md invariants 2 and 4).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from squall.tools.site_spec import HostSpec, Page, RobotsSpec, SiteSpec

from ..conftest import ServedSite
from ..measured_crawl import Finished, _index, _pages, _run, _status_is

SERVER_DELAY_S = 0.2
BACKOFF_BASE_S = 0.5

# hosts of the `polite` crawl: one behaviour each
DELAY2 = "127.0.0.2"  # Crawl-delay: 2
DELAY_HALF = "127.0.0.3"  # Crawl-delay: 0.5
TOO_LONG = "127.0.0.4"  # Crawl-delay: 10 > fetcher.max.crawl.delay 3, no force
DISALLOW = "127.0.0.5"  # Disallow: /private/
ROBOTS_503 = "127.0.0.6"  # robots.txt 503, 503, then 200
ROBOTS_404 = "127.0.0.7"  # robots.txt 404
ROBOTS_403 = "127.0.0.8"  # robots.txt 403
ROBOTS_MOVED = "127.0.0.9"  # robots.txt 301 → /robots-moved.txt (Disallow: /hidden)
RETRY_AFTER = "127.0.0.10"  # /limited answers 429 Retry-After: 5 once
BUSY = "127.0.0.11"  # /busy answers 429 without Retry-After three times
PER_AGENT = "127.0.0.13"  # Crawl-delay 0.3 / 2 / 0.6 for otherbot / squallbot / fastbot, one RFC 9309 group
ROBOTS_AGENT = "squallbot"
PER_AGENT_ROBOTS = (
    "User-agent: otherbot\nCrawl-delay: 0.3\n\n"
    "User-agent: squallbot\nCrawl-delay: 2\n\n"
    "User-agent: fastbot\nCrawl-delay: 0.6\n\n"
    "User-agent: *\nDisallow: /private/\n"
)
GAP_SLACK_S = 0.01  # the server's clock reads arrivals, the fetcher's clock its turns

# host of the `forced` crawl
CAPPED = "127.0.0.12"  # Crawl-delay: 2.5 > fetcher.max.crawl.delay 1, force
CAPPED_DELAY_S = 2.5
CAP_S = 1.0


def polite_site() -> SiteSpec:
    robots = "User-agent: *\nAllow: /\n"
    return SiteSpec(
        hosts={
            DELAY2: HostSpec(
                pages={"/": _index("/a", "/b", "/c"), **_pages("/a", "/b", "/c")},
                robots=RobotsSpec(text="User-agent: *\nCrawl-delay: 2\n"),
            ),
            DELAY_HALF: HostSpec(
                pages={"/": _index("/a", "/b", "/c", "/d"), **_pages("/a", "/b", "/c", "/d")},
                robots=RobotsSpec(text="User-agent: *\nCrawl-delay: 0.5\n"),
            ),
            TOO_LONG: HostSpec(
                pages={"/": _index("/a"), **_pages("/a")}, robots=RobotsSpec(text="User-agent: *\nCrawl-delay: 10\n")
            ),
            DISALLOW: HostSpec(
                pages={
                    "/": _index("/open", "/private/a", "/private/b"),
                    "/open": _index("/private/c"),
                    **_pages("/private/a", "/private/b", "/private/c"),
                },
                robots=RobotsSpec(text="User-agent: *\nDisallow: /private/\n"),
            ),
            ROBOTS_503: HostSpec(
                pages={"/": _index("/a", "/b"), **_pages("/a", "/b")},
                robots=RobotsSpec(statuses=(503, 503), text=robots),
            ),
            ROBOTS_404: HostSpec(pages={"/": _index("/a", "/b"), **_pages("/a", "/b")}, robots=None),
            ROBOTS_403: HostSpec(pages={"/": _index("/a", "/b"), **_pages("/a", "/b")}, robots=RobotsSpec(status=403)),
            ROBOTS_MOVED: HostSpec(
                pages={
                    "/": _index("/shown", "/hidden/a"),
                    **_pages("/shown", "/hidden/a"),
                    "/robots-moved.txt": Page(body="User-agent: *\nDisallow: /hidden\n", content_type="text/plain"),
                },
                robots=RobotsSpec(location="/robots-moved.txt"),
            ),
            RETRY_AFTER: HostSpec(
                pages={
                    "/": _index("/limited", "/after"),
                    "/after": Page(title="after"),
                    "/limited": Page(title="limited", statuses=(429,), retry_after="5"),
                },
                robots=RobotsSpec(text=robots),
            ),
            BUSY: HostSpec(
                pages={"/": _index("/busy"), "/busy": Page(title="busy", statuses=(429, 429, 429))},
                robots=RobotsSpec(text=robots),
            ),
            PER_AGENT: HostSpec(
                pages={"/": _index("/a", "/b", "/c", "/private/x"), **_pages("/a", "/b", "/c", "/private/x")},
                robots=RobotsSpec(text=PER_AGENT_ROBOTS),
            ),
        }
    )


def forced_site() -> SiteSpec:
    return SiteSpec(
        hosts={
            CAPPED: HostSpec(
                pages={"/": _index("/p1", "/p2", "/p3"), **_pages("/p1", "/p2", "/p3")},
                robots=RobotsSpec(text=f"User-agent: *\nCrawl-delay: {CAPPED_DELAY_S}\n"),
            ),
        }
    )


@pytest.fixture(scope="package")
def polite(tmp_path_factory: pytest.TempPathFactory, kafka_bootstrap: str) -> Iterator[Finished]:
    spec = polite_site()
    overrides = {
        "fetcher.server.delay": SERVER_DELAY_S,
        "fetcher.max.crawl.delay": 3.0,
        "fetcher.max.crawl.delay.force": False,
        "frontier.backoff.base.secs": BACKOFF_BASE_S,
        "frontier.backoff.max.secs": 8.0,
        "http.robots.retry.base.secs": 1.0,
        "http.robots.retry.max.secs": 2.0,
        "http.robots.agents": [ROBOTS_AGENT],
    }

    def finished(served: ServedSite, records: dict[str, dict[str, Any]]) -> bool:
        u = served.url
        return _status_is(
            {
                u(RETRY_AFTER, "/limited"): "FETCHED",
                u(BUSY, "/busy"): "FETCHED",
                u(ROBOTS_503, "/a"): "FETCHED",
                u(ROBOTS_503, "/b"): "FETCHED",
                u(DELAY2, "/c"): "FETCHED",
                u(TOO_LONG): "ERROR",
                u(TOO_LONG, "/a"): "ERROR",
                u(PER_AGENT, "/c"): "FETCHED",
            }
        )(served, records)

    yield from _run(
        tmp_path_factory, kafka_bootstrap, "polite", spec, overrides, finished, extra_seeds=((TOO_LONG, "/a"),)
    )


@pytest.fixture(scope="package")
def forced(tmp_path_factory: pytest.TempPathFactory, kafka_bootstrap: str) -> Iterator[Finished]:
    overrides = {
        "fetcher.server.delay": SERVER_DELAY_S,
        "fetcher.max.crawl.delay": CAP_S,
        "fetcher.max.crawl.delay.force": True,
        "frontier.robots.crawl.delay.enabled": True,
        "frontier.max.urls.per.bucket": 1,
        "metadata.persist": ["parse.*", "robots.crawl.delay"],
        "partition.url.mode": "byHost",
        # results (and the signals they carry) through the status topic, where the redelivery test reads them
        "frontier.result.inprocess": False,
    }

    def finished(served: ServedSite, records: dict[str, dict[str, Any]]) -> bool:
        return _status_is({served.url(CAPPED, p): "FETCHED" for p in ("/", "/p1", "/p2", "/p3")})(served, records)

    yield from _run(tmp_path_factory, kafka_bootstrap, "forced", forced_site(), overrides, finished)
