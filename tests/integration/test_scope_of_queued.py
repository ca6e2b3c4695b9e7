"""A scope change reaches the URLs already queued (through the real broker and a recording site).

A host's URLs wait in the frontier (held by a page limit); the worker is
restarted with ``urlfilters.regex.exclude`` refusing them and the limit is
lifted: they end ERROR with their scope reason, and the host gets no request
for them.
"""

from __future__ import annotations

import asyncio
import time

import yaml

from squall.cli.control import send_command
from squall.policy.control import Command, Op
from squall.tools.site_spec import HostSpec, RobotsSpec, SiteSpec

from .measured_crawl import _index, _pages


def test_queued_urls_out_of_scope_after_a_restart_end_with_their_scope_reason_unfetched(site, crawl) -> None:
    ip = "127.0.0.31"
    paths = ("/keep", "/drop1", "/drop2", "/drop3")
    served = site(SiteSpec(hosts={ip: HostSpec(pages={"/": _index(*paths), **_pages(*paths)},
                                               robots=RobotsSpec(text="User-agent: *\nAllow: /\n"))}))
    c = crawl(**{"fetcher.server.delay": 0.1})
    c.start_worker()
    asyncio.run(send_command(c.settings, Command(op=Op.HOST_LIMIT, by="test", at_s=time.time(), host=ip, pages=1)))
    c.seed(served.seeds)
    deadline = time.monotonic() + 120
    while len([u for u in c.records() if f"//{ip}:" in u]) < 5:  # the index page fetched, its four links queued
        assert time.monotonic() < deadline, c.records()
        time.sleep(0.2)
    c.stop_worker("w1")
    before = served.page_requests()
    assert sum(before.values()) == 1, before

    values = yaml.safe_load(c.conf_path.read_text())
    values["urlfilters.regex.exclude"] = ["/drop"]
    c.conf_path.write_text(yaml.safe_dump(values))
    c.settings = c._load()
    c.start_worker()
    asyncio.run(send_command(c.settings, Command(op=Op.HOST_LIMIT, by="test", at_s=time.time(), host=ip, pages=None)))
    while _host_record(c, ip).get("page_limit") is not None:  # applied: the held URLs are due again
        assert time.monotonic() < deadline + 120, _host_record(c, ip)
        time.sleep(0.2)
    c.wait_idle(timeout_s=120)

    records = {u: r for u, r in c.records().items() if f"//{ip}:" in u}
    dropped = {u: (r["status"], r.get("reason")) for u, r in records.items() if "/drop" in u}
    assert set(dropped.values()) == {("ERROR", "scope.regex")} and len(dropped) == 3, dropped
    assert records[served.url(ip, "/keep")]["status"] == "FETCHED"
    assert not any("/drop" in u for u in served.page_requests()), served.page_requests()


def _host_record(c, key: str) -> dict:  # noqa: ANN001
    from squall.cli.status_read import latest_records
    from squall.net.kafka_security import KafkaConnection
    from squall.policy.topics import changelog_name

    conn = KafkaConnection.from_settings(c.settings)
    return asyncio.run(latest_records(conn, changelog_name(c.settings, "hosts"))).get(key, {})
