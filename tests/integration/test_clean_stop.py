"""After a clean stop (SIGINT) ``squall status`` shows nothing in flight: the handed-back URLs are not lost.

A worker that stops hands the URLs waiting at its fetcher back to the
frontier, each as a result carrying its signal, and leaves the group before
any status updater applies them: the hosts changelog still lists the
hand-outs in flight until a worker owns the partitions again. ``squall
status`` applies the signals the group has not consumed to the host records
it reports (the regulator's own :func:`squall.policy.host_pacing.apply_signal`).
"""

from __future__ import annotations

import asyncio
import signal
import time

from squall.cli.status_read import latest_records
from squall.policy.topics import changelog_name
from squall.tools.site_spec import generated_site

HOSTS = [f"127.0.0.{i}" for i in range(2, 6)]


async def _unconsumed_handouts(settings) -> set[str]:
    """URLs of the fetch messages the group has not consumed yet (after its committed offsets)."""
    from squall.cli.status_read import committed_offsets
    from squall.policy.records import FetchMessage
    from squall.policy.topics import topic_name
    from squall.tools.kafka_admin import read_partitioned

    topic = topic_name(settings, "fetch")
    committed = await committed_offsets(settings) or {}
    starts = {p: o for (t, p), o in committed.items() if t == topic}
    return {FetchMessage.from_bytes(v).url async for _p, _k, v in read_partitioned(
        settings.kafka_bootstrap_servers, topic, missing_ok=True, starts=starts) if v is not None}


def test_status_after_a_clean_stop_counts_the_handed_back_urls_as_not_in_flight(site, crawl):
    served = site(generated_site(HOSTS, 20))
    c = crawl(**{"fetcher.server.delay": 1.0})
    c.start_worker("w1")
    c.seed(served.seeds)
    deadline = time.monotonic() + 90
    while len(served.requests()) < 12 and time.monotonic() < deadline:
        time.sleep(0.2)
    c.stop_worker("w1", sig=signal.SIGINT)
    assert "the URLs waiting here go back to the frontier" in c.log_text("w1")

    hosts = asyncio.run(latest_records(c.settings.kafka_bootstrap_servers, changelog_name(c.settings, "hosts")))
    assert sum(len(h.get("in_flight") or {}) for h in hosts.values()) > 0  # the changelog alone: still in flight
    report = c.report()
    # in flight now: only hand-outs still waiting on the fetch topic for the next owner (never the handed-back ones)
    assert report.in_flight == len(asyncio.run(_unconsumed_handouts(c.settings))), report.to_json()
    assert report.lag["status"] > 0  # the hand-backs (each result carrying its signal) wait for the next owner
    assert report.by_status["DISCOVERED"] > 0 and report.due_now > 0  # the handed-back URLs are due again

    c.start_worker("w1")  # and the next owner applies them: the crawl ends with every page fetched
    report = c.wait_idle(timeout_s=240)
    assert report.in_flight == 0
    assert {u for u, r in c.records().items() if r["status"] == "FETCHED"} == served.server.expected_pages()
