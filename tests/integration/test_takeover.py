"""A take-over whose earlier owner's fetch messages never come: the host is not held for 600 s.

Stranded hand-outs (docs/faults.md, mend 3): a worker recorded hand-outs in the hosts
table and died; their fetch messages never reached the next owner, so the
hand-outs held every place of their hosts until ``frontier.inflight.timeout.secs``
(600 s). Here the earlier owner is written straight into the hosts changelog —
three hand-outs of the only host, 30 s old, filling its places — with no fetch
message at all, then a real worker takes the partition over and the host is
seeded. The worker must hand them out again after ``frontier.takeover.grace.secs``
and finish the crawl (with the grace at 0, the rule off, it waits 600 s: the
stall this test reproduces).

The second test is the same scene with hand-outs this worker counts as its
own: the earlier owner's clock ran ahead, so they carry times after the
take-over. The take-over rule leaves them alone; the watch of this worker's
own hand-outs (:func:`squall.policy.takeover.own_handout`) sees their fetch
messages will never come — the fetch partition is read to its end — and
hands them out again.
"""

from __future__ import annotations

import asyncio
import json
import time

from aiokafka import AIOKafkaProducer

from squall.policy.frontier import HostRecord
from squall.policy.partition import partition_for_key, partition_key
from squall.policy.topics import all_topics, changelog_name
from squall.tools.kafka_admin import ensure_topics
from squall.tools.testsite import generated_site

HOST_IP = "127.0.0.2"
DELAY_S = 0.3


async def _write_host_record(settings, record: HostRecord) -> None:
    """Put ``record`` into the hosts table's changelog, as the earlier owner's worker would have."""
    bootstrap = settings["kafka.bootstrap.servers"]
    await ensure_topics(bootstrap, all_topics(settings), settings["topology.replication.factor"])
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(changelog_name(settings, "hosts"), key=record.key.encode(),
                                     value=json.dumps(record.to_dict()).encode(),
                                     partition=partition_for_key(record.key, settings["topology.partitions"]))
    finally:
        await producer.stop()


def _crawl_after_an_earlier_owner(site, crawl, handed_out_offset_s: float) -> str:
    """An earlier owner left the only host's places taken, no fetch messages sent; crawl it; the worker's log.

    ``handed_out_offset_s``: the hand-outs' time relative to now (s), as the
    earlier owner's clock stamped them. Asserts that every page was fetched,
    each once.
    """
    served = site(generated_site([HOST_IP], 3, disallow=None, cross_links=False))
    c = crawl(**{"fetcher.server.delay": DELAY_S, "frontier.takeover.grace.secs": 2.0})
    root = served.seeds[0]
    stranded = [root, root + "page/0", root + "page/1"]
    earlier = HostRecord(key=partition_key(root, "byHost"), seeded=True, delay_s=DELAY_S,
                         next_fetch_at_s=time.time() - 30).with_handout(stranded, time.time() + handed_out_offset_s)
    assert len(earlier.in_flight) >= earlier.places(8, 0.5)  # every place held: the host waits 600 s without a rule
    asyncio.run(_write_host_record(c.settings, earlier))
    c.start_worker("w1")
    c.seed(served.seeds)
    c.wait_idle(timeout_s=150)  # raises TimeoutError while the host is held

    expected = served.server.expected_pages()
    records = c.records()
    assert {u for u in expected if records.get(u, {}).get("status") != "FETCHED"} == set()
    requests = [r for r in served.requests() if r["path"] != "/robots.txt"]
    assert sorted(r["path"] for r in requests) == sorted({r["path"] for r in requests})  # each page once
    return (c.workdir / "worker-w1.log").read_text(errors="replace")


def test_an_earlier_owners_hand_outs_without_fetch_messages_are_handed_out_again(site, crawl):
    log = _crawl_after_an_earlier_owner(site, crawl, -30.0)
    assert "handing out again 3 hand-out(s)" in log


def test_hand_outs_stamped_after_the_take_over_whose_fetch_messages_never_come_are_handed_out_again(site, crawl):
    log = _crawl_after_an_earlier_owner(site, crawl, +20.0)  # the earlier owner's clock ran 20 s ahead
    assert "whose fetch messages this worker's fetcher read past without getting them" in log
