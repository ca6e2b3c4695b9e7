"""Operator commands through the real broker, measured at the recording server.

Each command is sent the way ``squall host ...`` / ``squall crawl ...`` sends it
(:func:`squall.cli.control.send_command`), and the test waits until the worker
applied it — the host record (hosts changelog) or the partition's crawl state
(control changelog) shows it — before it judges the requests that follow:

* ``host.delay`` raised mid-crawl: the gaps follow within one fetch; ``crawl.delay``
  the same for every host without a delay of its own;
* ``host.block --for``: no request to the host until the block ends,
  URLs waiting ahead at the fetcher included (they go back, ``fetch.deferred``);
* ``host.limit 5`` sent before the host is seen: exactly 5 pages fetched,
  the rest held in the frontier and shown as held by ``squall hosts``; raising it resumes;
* ``crawl.pause``: no request anywhere once applied, ``crawl.resume`` goes on;
* ``host.delete``: the host's URL records are gone and it gets no new request;
* a delay, a page limit, a pause and a block still hold after the owning
  worker is SIGKILLed and another (with an empty table directory) takes the
  partitions over;
* a malformed command from another producer reaches the dead-letter topic;
* ``squall frontier dump`` of a finished crawl, seeded into a new
  ``topology.id``, gives the same URL set.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

from squall.cli.control import send_command
from squall.cli.main import main
from squall.policy.control import Command, Op
from squall.tools.harness import Crawl
from squall.tools.site_spec import HostSpec, RobotsSpec, SiteSpec

from .measured_crawl import _gaps, _index, _pages

ALLOW = RobotsSpec(text="User-agent: *\nAllow: /\n")
WAIT_S = 120.0


def _host(n: int) -> HostSpec:
    paths = tuple(f"/p{i}" for i in range(n))
    return HostSpec(pages={"/": _index(*paths), **_pages(*paths)}, robots=ALLOW)


def _send(c: Crawl, op: Op, **kw: Any) -> Command:
    cmd = Command(op=op, by="test@loopback", at_s=time.time(), **kw)
    asyncio.run(send_command(c.settings, cmd))
    return cmd


def _changelog(c: Crawl, table: str) -> dict[str, dict[str, Any]]:
    from squall.cli.status_read import latest_records
    from squall.net.kafka_security import KafkaConnection
    from squall.policy.topics import changelog_name

    return asyncio.run(latest_records(KafkaConnection.from_settings(c.settings), changelog_name(c.settings, table)))


def _until(what: str, check: Callable[[], bool], timeout_s: float = WAIT_S) -> float:
    """Poll ``check`` until true; the time (Unix s) it was first seen true."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.1)
    return time.time()


def _applied_to_host(c: Crawl, key: str, cmd: Command) -> float:
    """When the host record of ``key`` was first seen with ``cmd`` in its operator log."""
    return _until(
        f"{cmd.op.value} not applied to {key}",
        lambda: cmd.log_entry() in _changelog(c, "hosts").get(key, {}).get("operator_log", []),
    )


def _applied_to_crawl(c: Crawl, cmd: Command) -> float:
    """When every partition's crawl state was first seen with ``cmd`` in its log."""
    n = c.settings.topology_partitions

    def everywhere() -> bool:
        states = _changelog(c, "control")
        return all(cmd.log_entry() in states.get(f"crawl:{p}", {}).get("log", []) for p in range(n))

    return _until(f"{cmd.op.value} not applied on every partition", everywhere)


def _page_times(served, ip: str) -> list[float]:
    return sorted(r["t"] for r in served.requests() if r["ip"] == ip and r["path"] != "/robots.txt")


def test_a_delay_raised_mid_crawl_spaces_the_hosts_requests_within_one_fetch(site, crawl) -> None:
    ip, new_delay_s = "127.0.0.21", 1.5
    served = site(SiteSpec(hosts={ip: _host(10)}))
    c = crawl(**{"fetcher.server.delay": 0.3})
    c.start_worker()
    c.seed(served.seeds)
    _until("no page fetched", lambda: len(_page_times(served, ip)) >= 3)
    applied_at = _applied_to_host(c, ip, _send(c, Op.HOST_DELAY, host=ip, delay_s=new_delay_s))
    c.wait_idle(timeout_s=WAIT_S)
    later = [t for t in _page_times(served, ip) if t > applied_at]
    assert len(later) >= 3, later
    assert min(_gaps(later)[1:]) >= new_delay_s, _gaps(later)  # one fetch may already have had its turn
    assert set(served.page_requests()) == served.server.expected_pages()


def test_a_crawl_wide_delay_raised_mid_crawl_spaces_every_host_without_its_own(site, crawl) -> None:
    hosts, new_delay_s = ("127.0.0.35", "127.0.0.36"), 1.2
    served = site(SiteSpec(hosts={ip: _host(8) for ip in hosts}))
    c = crawl(**{"fetcher.server.delay": 0.3})
    c.start_worker()
    c.seed(served.seeds)
    _until("no page fetched", lambda: all(len(_page_times(served, ip)) >= 3 for ip in hosts))
    applied_at = _applied_to_crawl(c, _send(c, Op.CRAWL_DELAY, delay_s=new_delay_s))
    c.wait_idle(timeout_s=WAIT_S)
    for ip in hosts:
        later = [t for t in _page_times(served, ip) if t > applied_at]
        assert len(later) >= 3, (ip, later)
        assert min(_gaps(later)[1:]) >= new_delay_s, (ip, _gaps(later))  # one fetch may already have had its turn


def test_a_blocked_host_gets_no_request_until_the_block_ends(site, crawl) -> None:
    ip, other, block_s = "127.0.0.22", "127.0.0.23", 6.0
    served = site(SiteSpec(hosts={ip: _host(8), other: _host(2)}))
    # a 1 s delay and a 0.5 s lead: while one URL is fetched, the next already waits at the fetcher
    c = crawl(**{"fetcher.server.delay": 1.0})
    c.start_worker()
    c.seed(served.seeds)
    _until("no page fetched", lambda: len(_page_times(served, ip)) >= 2)
    cmd = _send(c, Op.HOST_BLOCK, host=ip, until_s=time.time() + block_s, reason="complaint 4711")
    applied_at = _applied_to_host(c, ip, cmd)
    assert cmd.until_s is not None and applied_at < cmd.until_s
    # the URLs that waited ahead at the fetcher went back to the frontier, "not attempted"
    _until(
        "no waiting URL handed back",
        lambda: any(r.get("reason") == "fetch.deferred" for u, r in c.records().items() if f"//{ip}:" in u),
        timeout_s=block_s,
    )
    c.wait_idle(timeout_s=WAIT_S)
    during = [t for t in served.start_times(ip) if applied_at < t < cmd.until_s]
    assert during == [], [round(t - applied_at, 2) for t in during]
    assert any(t >= cmd.until_s for t in served.start_times(ip))
    counts = served.page_requests()
    assert set(counts) == served.server.expected_pages() and max(counts.values()) == 1, counts
    host = _changelog(c, "hosts")[ip]
    assert host["operator_block_reason"] == "complaint 4711"


def test_a_page_limit_fetches_exactly_that_many_and_raising_it_resumes(site, crawl, capsys) -> None:
    ip = "127.0.0.24"
    served = site(SiteSpec(hosts={ip: _host(9)}))  # ten pages
    c = crawl(**{"fetcher.server.delay": 0.2})
    c.start_worker()
    limit = _send(c, Op.HOST_LIMIT, host=ip, pages=5)  # before the host is seen: ahead of time
    _applied_to_host(c, ip, limit)
    c.seed(served.seeds)

    def settled_at_five() -> bool:
        records = {u: r for u, r in c.records().items() if f"//{ip}:" in u}
        fetched = [u for u, r in records.items() if r["status"] == "FETCHED"]
        return len(fetched) == 5 and len(records) == 10

    _until("the limit of 5 was not reached", settled_at_five)
    host = _changelog(c, "hosts")[ip]
    assert (host["pages_fetched"], host["page_limit"], host["in_flight"]) == (5, 5, {}), host
    assert sum(served.page_requests().values()) == 5
    held = [u for u, r in c.records().items() if f"//{ip}:" in u and r["status"] == "DISCOVERED"]
    assert len(held) == 5, held
    assert main(["--conf", str(c.conf_path), "hosts", "--json"]) == 0  # shown as held by squall hosts
    row = next(r for r in json.loads(capsys.readouterr().out) if r["host"] == ip)
    assert (row["held_by_limit"], row["page_limit"], row["pages_fetched"]) == (5, 5, 5), row
    _applied_to_host(c, ip, _send(c, Op.HOST_LIMIT, host=ip, pages=20))
    _until("raising the limit did not resume", lambda: set(served.page_requests()) == served.server.expected_pages())
    c.wait_idle(timeout_s=WAIT_S)
    assert max(served.page_requests().values()) == 1


def test_a_paused_crawl_starts_nothing_anywhere_and_resume_goes_on(site, crawl) -> None:
    hosts = ("127.0.0.25", "127.0.0.26", "127.0.0.27")
    served = site(SiteSpec(hosts={ip: _host(8) for ip in hosts}))
    c = crawl(**{"fetcher.server.delay": 0.5})
    c.start_worker()
    c.seed(served.seeds)
    _until("no page fetched", lambda: all(len(_page_times(served, ip)) >= 2 for ip in hosts))
    applied_at = _applied_to_crawl(c, _send(c, Op.CRAWL_PAUSE))
    time.sleep(3.0)  # a window in which nothing may start
    resume = _send(c, Op.CRAWL_RESUME)
    during = [r for r in served.requests() if applied_at < r["t"] < resume.at_s]
    assert during == [], during
    assert not set(served.page_requests()) >= served.server.expected_pages()  # the pause came mid-crawl
    _applied_to_crawl(c, resume)
    c.wait_idle(timeout_s=WAIT_S)
    counts = served.page_requests()
    assert set(counts) == served.server.expected_pages() and max(counts.values()) == 1, counts


def test_a_deleted_host_loses_its_urls_and_gets_no_new_request(site, crawl) -> None:
    ip = "127.0.0.28"
    served = site(SiteSpec(hosts={ip: _host(9)}))
    c = crawl(**{"fetcher.server.delay": 1.0})
    c.start_worker()
    c.seed(served.seeds)
    _until("no page fetched", lambda: len(_page_times(served, ip)) >= 3)
    applied_at = _applied_to_host(c, ip, _send(c, Op.HOST_DELETE, host=ip))

    def quiet() -> bool:  # Crawl.wait_idle wants URLs in the crawl: this one may have none left
        report = c.report().to_json()
        return report["in_flight"] == 0 and not any(report["lag"].values())

    _until("hand-outs still out after the delete", quiet)
    time.sleep(2.0)  # two delays of the host: a request it still got would arrive in them
    assert [t for t in _page_times(served, ip) if t > applied_at] == []
    requested_before = {f"http://{r['ip']}:{served.server.port}{r['path']}" for r in served.requests()}
    left = {u for u in c.records() if f"//{ip}:" in u}
    assert len(left) <= 1 and left <= requested_before, left  # at most the fetch that had started
    host = _changelog(c, "hosts")[ip]
    assert host["operator_log"][-1]["op"] == "host.delete" and host["in_flight"] == {}, host


def test_a_malformed_command_from_another_producer_is_dead_lettered_and_the_stream_goes_on(crawl) -> None:
    from aiokafka import AIOKafkaProducer

    from squall.net.kafka_security import KafkaConnection
    from squall.policy.topics import topic_name
    from squall.tools.kafka_admin import read_partitioned

    c = crawl()
    c.start_worker()
    conn = KafkaConnection.from_settings(c.settings)

    async def produce() -> None:
        producer = AIOKafkaProducer(**conn.client_kwargs(), acks="all")
        await producer.start()
        try:
            await producer.send_and_wait(topic_name(c.settings, "control"), key=b"x", value=b'{"v":1,"op":"host.nuke"}')
        finally:
            await producer.stop()

    _applied_to_host(c, "example.org", _send(c, Op.HOST_DELAY, host="example.org", delay_s=1.0))  # worker up
    asyncio.run(produce())

    async def deadlettered() -> list[dict[str, Any]]:
        return [json.loads(v) async for _, _, v in read_partitioned(conn, topic_name(c.settings, "deadletter"), missing_ok=True) if v]

    _until("nothing dead-lettered", lambda: any("host.nuke" in d["value"] for d in asyncio.run(deadlettered())))
    found = [d for d in asyncio.run(deadlettered()) if "host.nuke" in d["value"]]
    assert "unknown op" in found[0]["detail"], found
    # the stream goes on: a good command after it is applied
    _applied_to_host(c, "example.org", _send(c, Op.HOST_DELAY, host="example.org", delay_s=2.0))



def test_a_frontier_dump_seeded_into_a_new_crawl_reproduces_its_url_set(site, crawl, capsys) -> None:
    served = site(SiteSpec(hosts={"127.0.0.29": _host(4), "127.0.0.30": _host(2)}))
    first = crawl(**{"fetcher.server.delay": 0.1})
    first.start_worker()
    first.seed(served.seeds)
    first.wait_idle(timeout_s=WAIT_S)
    first.stop()
    capsys.readouterr()
    assert main(["--conf", str(first.conf_path), "frontier", "dump"]) == 0
    dump = capsys.readouterr().out.splitlines()
    assert len(dump) == len(first.records()) == 8, dump
    root = served.url("127.0.0.29", "/")
    assert main(["--conf", str(first.conf_path), "url", "show", "--json", root]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["url"], shown["status"], shown["attempts"]) == (root, "FETCHED", 1), shown
    assert main(["--conf", str(first.conf_path), "urls", "--host", "127.0.0.30", "--status", "FETCHED"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert sorted(line.split("\t")[0] for line in listed) == sorted(u for u in first.records() if "//127.0.0.30:" in u)
    second = crawl(**{"fetcher.server.delay": 0.1})
    second.start_worker()
    second.seed(dump)
    second.wait_idle(timeout_s=WAIT_S)
    assert set(second.records()) == set(first.records())


def test_a_pause_holds_after_the_owning_worker_is_killed_and_another_takes_over(site, crawl) -> None:
    served, c = _crawled_by_w1(site, crawl, {"127.0.0.32": 8, "127.0.0.33": 8}, delay_s=0.5, fetched=2)
    applied_at = _applied_to_crawl(c, _send(c, Op.CRAWL_PAUSE))
    # w1 committed its control-topic offsets: w2 does not read the command again, the control table is all it has
    _take_over(c)  # w2 has a table directory of its own: the pause comes back from the control changelog
    time.sleep(3.0)  # w2 owns every host now: a window in which nothing may start
    resume = _send(c, Op.CRAWL_RESUME)
    during = [r for r in served.requests() if applied_at < r["t"] < resume.at_s]
    assert during == [], during
    _applied_to_crawl(c, resume)
    c.wait_idle(timeout_s=WAIT_S)
    assert set(served.page_requests()) == served.server.expected_pages()


def test_a_block_holds_after_the_owning_worker_is_killed_and_another_takes_over(site, crawl) -> None:
    ip, block_s = "127.0.0.34", 20.0
    served, c = _crawled_by_w1(site, crawl, {ip: 8}, delay_s=0.5, fetched=2)
    cmd = _send(c, Op.HOST_BLOCK, host=ip, until_s=time.time() + block_s, reason="takeover")
    applied_at = _applied_to_host(c, ip, cmd)
    _take_over(c)
    c.wait_idle(timeout_s=WAIT_S)
    assert cmd.until_s is not None
    during = [round(t - applied_at, 2) for t in served.start_times(ip) if applied_at < t < cmd.until_s]
    assert during == [], during
    assert set(served.page_requests()) == served.server.expected_pages()


def test_a_delay_holds_after_the_owning_worker_is_killed_and_another_takes_over(site, crawl) -> None:
    ip, new_delay_s = "127.0.0.37", 1.5
    served, c = _crawled_by_w1(site, crawl, {ip: 11}, delay_s=0.3, fetched=3)
    applied_at = _applied_to_host(c, ip, _send(c, Op.HOST_DELAY, host=ip, delay_s=new_delay_s))
    _until("one fetch at the new delay", lambda: len([t for t in _page_times(served, ip) if t > applied_at]) >= 2)
    taken_over_at = _take_over(c)  # the delay comes back from the hosts changelog, not from the command
    c.wait_idle(timeout_s=WAIT_S)
    later = [t for t in _page_times(served, ip) if t > applied_at]
    assert len([t for t in later if t > taken_over_at]) >= 3, later
    assert min(_gaps(later)[1:]) >= new_delay_s, _gaps(later)  # one fetch may already have had its turn
    assert set(served.page_requests()) == served.server.expected_pages()


def test_a_page_limit_holds_after_the_owning_worker_is_killed_and_another_takes_over(site, crawl) -> None:
    ip = "127.0.0.38"
    served = site(SiteSpec(hosts={ip: _host(9)}))  # ten pages
    c = crawl(**{"fetcher.server.delay": 1.0, "kafka.session.timeout.secs": TAKEOVER_SESSION_S})
    c.start_worker("w1")
    _applied_to_host(c, ip, _send(c, Op.HOST_LIMIT, host=ip, pages=5))
    c.seed(served.seeds)
    _until("no page fetched", lambda: len(_page_times(served, ip)) >= 3)
    _take_over(c)  # w2 counts on from the pages the hosts changelog says were fetched

    def settled_at_five() -> bool:
        records = {u: r for u, r in c.records().items() if f"//{ip}:" in u}
        return len(records) == 10 and sum(r["status"] == "FETCHED" for r in records.values()) == 5

    _until("the limit of 5 was not reached", settled_at_five)
    time.sleep(3.0)  # three delays of the host: a sixth page would be requested in them
    assert len(served.page_requests()) == 5, served.page_requests()  # a fetch cut by the kill may be repeated, not a sixth page
    host = _changelog(c, "hosts")[ip]
    assert (host["pages_fetched"], host["page_limit"], host["in_flight"]) == (5, 5, {}), host


TAKEOVER_SESSION_S = 6.0  # kafka.session.timeout.secs of the takeover tests: the group notices the kill quickly


def _crawled_by_w1(site, crawl, pages: dict[str, int], delay_s: float, fetched: int) -> tuple[Any, Crawl]:
    """The served site and the crawl of ``pages`` (address → linked pages besides ``/``) by worker ``w1`` alone.

    ``delay_s`` is ``fetcher.server.delay`` (s); returned once every host had
    ``fetched`` page requests, ready for a command and :func:`_take_over`.
    """
    served = site(SiteSpec(hosts={ip: _host(n) for ip, n in pages.items()}))
    c = crawl(**{"fetcher.server.delay": delay_s, "kafka.session.timeout.secs": TAKEOVER_SESSION_S})
    c.start_worker("w1")
    c.seed(served.seeds)
    _until("no page fetched", lambda: all(len(_page_times(served, ip)) >= fetched for ip in pages))
    return served, c


def _take_over(c: Crawl) -> float:
    """SIGKILL worker ``w1`` once its control-topic offsets are committed, start ``w2``; when w2 owns every partition (Unix s).

    With the offsets committed w2 does not read the commands again: what it
    knows of them comes from the tables' changelogs alone. w2 gets a table
    directory of its own.
    """
    _until("the control topic's offsets not committed", lambda: _control_committed(c))
    c.stop_worker("w1", kill=True)
    c.start_worker("w2")
    everything = ", ".join(str(p) for p in range(c.settings.topology_partitions))
    return _until("w2 did not take the partitions over", lambda: f"due index rebuilt for partitions [{everything}]" in c.log_text("w2"))


def _control_committed(c: Crawl) -> bool:
    """Whether the worker group's committed offsets of the control topic are at its end on every partition."""
    from squall.cli.status_read import committed_offsets
    from squall.net.kafka_security import KafkaConnection
    from squall.policy.topics import topic_name
    from squall.tools.kafka_admin import end_offsets

    topic = topic_name(c.settings, "control")
    committed = asyncio.run(committed_offsets(c.settings)) or {}
    ends = asyncio.run(end_offsets(KafkaConnection.from_settings(c.settings), topic))
    return all(committed.get((topic, p), 0) >= end for p, end in ends.items())
