"""The fault farm: a recording loopback site of mixed hosts, and each host's delay in force.

Hosts (one loopback address each, all on one port):

* ``127.0.0.40``, ``.41``: plain interlinked pages;
* ``.42``: robots.txt ``Crawl-delay: 1`` (slower than ``fetcher.server.delay``);
* ``.43``: three pages answer 503 with ``Retry-After: 2`` once, then 200;
* ``.44``: slow pages (each answer takes ``SLOW_S``), so a kill often lands during a fetch;
* ``.45``: robots.txt answers 503 twice, then recovers (RFC 9309 §2.3.1.4:
  complete disallow meanwhile, retried after ``http.robots.retry.base.secs``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from squall.tools.site_spec import Page, RobotsSpec, SiteSpec, generated_site

PLAIN = ("127.0.0.40", "127.0.0.41")
CRAWL_DELAY, RETRY_AFTER, SLOW, ROBOTS_503 = "127.0.0.42", "127.0.0.43", "127.0.0.44", "127.0.0.45"
HOSTS = (*PLAIN, CRAWL_DELAY, RETRY_AFTER, SLOW, ROBOTS_503)
SERVER_DELAY_S = 0.3
CRAWL_DELAY_S = 1.0
RETRY_AFTER_S = "2"
SLOW_S = 0.4


@dataclass(frozen=True)
class Farm:
    spec: SiteSpec
    delay_s: dict[str, float]            # host → delay in force between two request starts
    scripted_answers: dict[str, int]     # path (relative, "/page/1") on RETRY_AFTER → answers scripted


def fault_farm(seed: int, pages_per_host: int) -> Farm:
    spec = generated_site(list(HOSTS), pages_per_host, disallow="/private/", seed=seed)
    allow = "User-agent: *\nDisallow: /private/\n"
    spec.hosts[CRAWL_DELAY].robots = RobotsSpec(text=allow + f"Crawl-delay: {CRAWL_DELAY_S:g}\n")
    spec.hosts[ROBOTS_503].robots = RobotsSpec(text=allow, statuses=(503, 503))
    limited = [f"/page/{k}" for k in range(min(3, pages_per_host))]
    for path in limited:
        page = spec.hosts[RETRY_AFTER].pages[path]
        spec.hosts[RETRY_AFTER].pages[path] = replace(page, statuses=(503,), retry_after=RETRY_AFTER_S)
    for path, page in list(spec.hosts[SLOW].pages.items()):
        if isinstance(page, Page):
            spec.hosts[SLOW].pages[path] = replace(page, delay_s=SLOW_S)
    delays = {ip: SERVER_DELAY_S for ip in HOSTS}
    delays[CRAWL_DELAY] = CRAWL_DELAY_S
    return Farm(spec, delays, {path: 2 for path in limited})
