"""Rate limits, every host's pace, the queue regulator's idempotence and the crawler's own audit, through the real broker."""

from __future__ import annotations

import asyncio
import json
import math
import time
from dataclasses import replace

import pytest

from squall.cli.status_read import latest_records
from squall.policy.partition import partition_for_key
from squall.policy.records import SignalKind, SignalMessage
from squall.policy.topics import changelog_name, topic_name

from ..measured_crawl import AUDIT_TOLERANCE_S, Finished, _gaps, assert_audit_agrees_with_the_server
from .conftest import (
    BACKOFF_BASE_S,
    BUSY,
    CAP_S,
    CAPPED,
    CAPPED_DELAY_S,
    DELAY2,
    DELAY_HALF,
    GAP_SLACK_S,
    PER_AGENT,
    RETRY_AFTER,
    ROBOTS_503,
    ROBOTS_MOVED,
    SERVER_DELAY_S,
    polite_site,
)

# ---------------------------------------------------------------------------- rate limits


def test_retry_after_5_keeps_the_host_unrequested_for_5s(polite: Finished) -> None:
    reqs = [r for r in polite.served.requests() if r["ip"] == RETRY_AFTER]
    limited = [i for i, r in enumerate(reqs) if r["status"] == 429]
    assert len(limited) == 1, polite.describe(RETRY_AFTER)
    i = limited[0]
    assert i + 1 < len(reqs), polite.describe(RETRY_AFTER)
    assert reqs[i + 1]["t"] - reqs[i]["t"] >= 5.0, polite.describe(RETRY_AFTER)
    record = polite.records[polite.url(RETRY_AFTER, "/limited")]
    assert record["status"] == "FETCHED" and record["attempts"] >= 2, record
    assert polite.records[polite.url(RETRY_AFTER, "/after")]["status"] == "FETCHED"


def test_headerless_429_backs_off_with_growing_gaps_until_fetched(polite: Finished) -> None:
    busy = [r for r in polite.served.requests() if r["ip"] == BUSY and r["path"] == "/busy"]
    assert [r["status"] for r in busy] == [429, 429, 429, 200], polite.describe(BUSY)
    gaps = _gaps([r["t"] for r in busy])
    # back-off base 0.5 s doubling (jitter only adds): ≥ 0.5, ≥ 1, ≥ 2
    for k, gap in enumerate(gaps):
        assert gap >= BACKOFF_BASE_S * 2**k, (k, polite.describe(BUSY))
    assert gaps[-1] > gaps[0], polite.describe(BUSY)
    record = polite.records[polite.url(BUSY, "/busy")]
    assert record["status"] == "FETCHED" and record["attempts"] == 4, record


# ---------------------------------------------------------------------------- every host, every URL


def test_every_host_is_paced_and_every_rescheduled_url_ends_fetched(polite: Finished) -> None:
    floors = {DELAY2: 2.0, DELAY_HALF: 0.5, PER_AGENT: 2.0 - GAP_SLACK_S}
    for ip in polite_site().hosts:
        if ip == ROBOTS_MOVED:
            continue  # its two robots requests are one robots fetch (a redirect hop); checked above
        assert polite.served.min_gap(ip) >= floors.get(ip, SERVER_DELAY_S), polite.describe(ip)
    assert all(
        n == 1
        for u, n in polite.served.page_requests().items()
        if u not in (polite.url(RETRY_AFTER, "/limited"), polite.url(BUSY, "/busy"))
    ), polite.served.page_requests()
    finals = {"FETCHED", "ERROR", "REDIRECTION"}
    assert {u: r["status"] for u, r in polite.records.items() if r["status"] not in finals} == {}
    retried = {u for u, r in polite.records.items() if r["attempts"] > 1}
    assert retried == {polite.url(RETRY_AFTER, "/limited"), polite.url(BUSY, "/busy")}
    # rescheduled: after a rate limit (counted attempts) or while robots.txt was unreachable (no attempt)
    rescheduled = retried | {polite.url(ROBOTS_503)}
    assert {u: polite.records[u]["status"] for u in rescheduled} == {u: "FETCHED" for u in rescheduled}
    assert polite.records[polite.url(ROBOTS_503)]["attempts"] == 1


# ---------------------------------------------------------------------------- regulator idempotence


async def _read(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    from squall.tools.kafka_admin import read_topic

    return [kv async for kv in read_topic(bootstrap, topic)]


def _end(bootstrap: str, topic: str) -> int:
    """Records ever written to ``topic`` (sum of end offsets; compaction never lowers it)."""
    from squall.tools.kafka_admin import end_offsets

    return sum(asyncio.run(end_offsets(bootstrap, topic)).values())


async def _produce(bootstrap: str, topic: str, key: bytes, values: list[bytes], partition: int) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(topic, key=key, value=value, partition=partition)
    finally:
        await producer.stop()


def test_queue_regulator_is_idempotent_under_redelivery(forced: Finished) -> None:
    settings = forced.crawl.settings
    bootstrap = settings["kafka.bootstrap.servers"]
    hosts_log = changelog_name(settings, "hosts")
    # a fetch result carries its signal (the status topic); a signal with no result travels alone
    results = [
        json.loads(v)
        for k, v in asyncio.run(_read(bootstrap, topic_name(settings, "status")))
        if k == CAPPED.encode() and v is not None
    ]
    signals = [json.dumps(r["signal"]).encode() for r in results if "signal" in r]
    signals += [
        v
        for k, v in asyncio.run(_read(bootstrap, topic_name(settings, "signals")))
        if k == CAPPED.encode() and v is not None
    ]
    assert len(signals) >= 4, signals  # one per fetched URL (more if a fetch was re-delivered)
    before = asyncio.run(latest_records(bootstrap, hosts_log))[CAPPED]
    writes_before = _end(bootstrap, hosts_log)
    assert before["in_flight"] == {} and before["crawl_delay"]["delay_s"] == math.ceil(CAPPED_DELAY_S)

    # Re-deliver every signal of the host (a consumer rewound after a crash), then one with an
    # already-applied fetch id that would block the host if applied, then a new marker signal
    # that changes nothing but the remembered ids: once the marker shows in the hosts changelog,
    # the regulator has consumed everything before it on that partition.
    last = SignalMessage.from_bytes(signals[-1])
    conflicting = replace(last, kind=SignalKind.RATE_LIMITED, at_s=time.time(), delay_s=60.0, robots_crawl_delay_s=30)
    marker = SignalMessage(
        key=CAPPED,
        url=forced.url(CAPPED, "/marker"),
        fetch_id="marker:test",
        kind=SignalKind.OTHER,
        at_s=0.0,
        delay_s=0.0,
    )
    partition = partition_for_key(CAPPED, settings["topology.partitions"])
    asyncio.run(
        _produce(
            bootstrap,
            topic_name(settings, "signals"),
            CAPPED.encode(),
            [*signals, conflicting.to_bytes(), marker.to_bytes()],
            partition,
        )
    )

    deadline = time.monotonic() + 120.0
    while True:
        after = asyncio.run(latest_records(bootstrap, hosts_log))[CAPPED]
        if marker.fetch_id in after["seen_fetch_ids"] or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert marker.fetch_id in after["seen_fetch_ids"], "the regulator did not consume the marker signal"
    assert after == {**before, "seen_fetch_ids": before["seen_fetch_ids"] + [marker.fetch_id]}
    assert _end(bootstrap, hosts_log) == writes_before + 1  # the duplicates wrote nothing; only the marker did


# ---------------------------------------------------------------------------- the crawler's own audit


@pytest.mark.parametrize("crawl_name", ["polite", "forced"])
def test_the_crawlers_audit_agrees_with_the_server_request_for_request(
    request: pytest.FixtureRequest, crawl_name: str
) -> None:
    finished: Finished = request.getfixturevalue(crawl_name)
    floors = {DELAY2: 2.0, DELAY_HALF: 0.5, CAPPED: CAP_S, PER_AGENT: 2.0}
    assert_audit_agrees_with_the_server(finished.crawl, finished.served, floors, SERVER_DELAY_S)


def test_the_audit_remembers_the_retry_after_block_and_no_request_fell_inside_it(polite: Finished) -> None:
    host = {h["key"]: h for h in polite.crawl.audit()["by_host"]}[RETRY_AFTER]
    limited = next(r for r in polite.served.requests() if r["ip"] == RETRY_AFTER and r["status"] == 429)
    # the block began at (or after) the 429 request and lasted its Retry-After of 5 s
    assert host["block_from_s"] == pytest.approx(limited["t"], abs=1.0)
    assert host["blocked_until_s"] - limited["t"] >= 5.0 - AUDIT_TOLERANCE_S
    assert host["inside_block"] == 0 and host["violations"] == 0
