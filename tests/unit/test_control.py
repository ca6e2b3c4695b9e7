"""Operator commands (squall.policy.control): the message, its validation, and what it does to a queue."""

from __future__ import annotations

import argparse
import json

import pytest

from squall.cli.control import build_command
from squall.errors import MessageError
from squall.policy.control import (
    Command,
    CrawlControl,
    Op,
    apply_to_crawl,
    apply_to_host,
    check_host,
    hand_back_at,
    limit_reached,
    pace_config,
    parse_duration,
    parse_time,
    steer_pace,
)
from squall.policy.frontier import INF, HostRecord
from squall.policy.pace import FetchEnded, PaceState, after_fetch, delay_in_force
from squall.policy.records import SignalKind
from tests.unit.settings_helper import settings_of

NOW = 1_764_655_200.0


def cmd(op: Op, **kw) -> Command:
    return Command(op=op, by="alice@box", at_s=NOW, **kw)


@pytest.mark.parametrize(
    "command",
    [
        cmd(Op.HOST_DELAY, host="example.org", delay_s=3.0),
        cmd(Op.HOST_DELAY, host="example.org", delay_s=None),
        cmd(Op.HOST_BLOCK, host="example.org", until_s=NOW + 20, reason="complaint 4711"),
        cmd(Op.HOST_UNBLOCK, host="127.0.0.2"),
        cmd(Op.HOST_LIMIT, host="example.org", pages=5),
        cmd(Op.HOST_LIMIT, host="example.org", pages=None),
        cmd(Op.HOST_DELETE, host="example.org"),
        cmd(Op.CRAWL_DELAY, delay_s=2.0),
        cmd(Op.CRAWL_PAUSE),
        cmd(Op.CRAWL_RESUME),
    ],
    ids=lambda c: c.op.value,
)
def test_every_command_survives_its_own_wire_format(command: Command) -> None:
    assert Command.from_bytes(command.to_bytes()) == command


def test_the_documented_example_decodes() -> None:
    raw = (
        b'{"v": 1, "op": "host.block", "host": "example.org", "args": {"until_s": 1764662400.0,'
        b' "reason": "complaint 4711"}, "by": "alice@ops-box", "at": 1764655200.0}'
    )
    c = Command.from_bytes(raw)
    assert (c.op, c.host, c.until_s, c.reason, c.by) == (
        Op.HOST_BLOCK,
        "example.org",
        1764662400.0,
        "complaint 4711",
        "alice@ops-box",
    )


BAD = [
    (b"not json", "not JSON"),
    (b"[1]", "JSON object"),
    (b'{"v": 2, "op": "crawl.pause", "by": "a", "at": 1}', "version"),
    (b'{"v": 1, "op": "host.nuke", "host": "a.org", "by": "a", "at": 1}', "unknown op"),
    (b'{"v": 1, "op": "host.delay", "host": "bad host", "args": {"delay_s": 1}, "by": "a", "at": 1}', "host name"),
    (b'{"v": 1, "op": "host.delay", "args": {"delay_s": 1}, "by": "a", "at": 1}', "host"),
    (b'{"v": 1, "op": "host.delay", "host": "a.org", "args": {"delay_s": -1}, "by": "a", "at": 1}', "delay_s"),
    (b'{"v": 1, "op": "host.delay", "host": "a.org", "args": {"delay_s": "3"}, "by": "a", "at": 1}', "delay_s"),
    (b'{"v": 1, "op": "host.block", "host": "a.org", "by": "a", "at": 1}', "until_s"),
    (b'{"v": 1, "op": "host.limit", "host": "a.org", "args": {"pages": 1.5}, "by": "a", "at": 1}', "pages"),
    (b'{"v": 1, "op": "host.limit", "host": "a.org", "args": {"pages": true}, "by": "a", "at": 1}', "pages"),
    (b'{"v": 1, "op": "crawl.pause", "host": "a.org", "by": "a", "at": 1}', "no host"),
    (b'{"v": 1, "op": "crawl.pause", "at": 1}', "by"),
    (b'{"v": 1, "op": "crawl.pause", "by": "a"}', "at"),
    (b'{"v": 1, "op": "crawl.pause", "by": "a", "at": NaN}', "at"),
]


@pytest.mark.parametrize(("raw", "why"), BAD, ids=[w for _, w in BAD])
def test_a_malformed_command_is_refused_with_its_reason(raw: bytes, why: str) -> None:
    with pytest.raises(MessageError, match=why):
        Command.from_bytes(raw)


@pytest.mark.parametrize(
    ("given", "key"),
    [("Example.ORG.", "example.org"), ("127.0.0.2", "127.0.0.2"), ("[::1]", "::1"), ("bücher.de", "xn--bcher-kva.de")],
)
def test_host_names_are_spelled_as_partition_keys(given: str, key: str) -> None:
    assert check_host(given) == key


@pytest.mark.parametrize("given", ["", "a b", "http://a.org/", "a.org:80", "-a.org", "a..org", "x" * 64 + ".org"])
def test_a_malformed_host_name_is_refused(given: str) -> None:
    with pytest.raises(MessageError):
        check_host(given)


@pytest.mark.parametrize(("text", "seconds"), [("90", 90.0), ("20s", 20.0), ("1.5m", 90.0), ("2h", 7200.0), ("1d", 86400.0)])
def test_durations_read_with_their_unit(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "2x", "-3s", "h"])
def test_a_malformed_duration_is_refused(text: str) -> None:
    with pytest.raises(MessageError):
        parse_duration(text)


def test_times_are_iso_8601_in_utc_or_unix_seconds() -> None:
    assert parse_time("2025-12-02T06:00:00Z") == parse_time("2025-12-02T06:00") == 1764655200.0
    assert parse_time("1764655200") == 1764655200.0
    with pytest.raises(MessageError):
        parse_time("tomorrow")


def test_host_commands_set_the_records_operator_fields_and_log_them_once() -> None:
    host = HostRecord(key="example.org")
    block = cmd(Op.HOST_BLOCK, host="example.org", until_s=NOW + 20, reason="complaint")
    host = apply_to_host(apply_to_host(host, block), block)  # re-delivered: applied once
    assert (host.operator_blocked_until_s, host.operator_block_reason) == (NOW + 20, "complaint")
    assert host.operator_log == [block.log_entry()]
    host = apply_to_host(host, cmd(Op.HOST_UNBLOCK, host="example.org"))
    assert host.operator_blocked_until_s == 0.0 and host.operator_block_reason is None
    host = apply_to_host(host, cmd(Op.HOST_DELAY, host="example.org", delay_s=3.0))
    host = apply_to_host(host, cmd(Op.HOST_LIMIT, host="example.org", pages=5))
    assert (host.operator_delay_s, host.page_limit) == (3.0, 5)
    assert [e["op"] for e in host.operator_log] == ["host.block", "host.unblock", "host.delay", "host.limit"]
    assert HostRecord.from_dict(json.loads(json.dumps(host.to_dict()))) == host


def test_a_deleted_host_keeps_only_its_key_and_operator_log() -> None:
    host = HostRecord(key="a.org", seeded=True, url_count=7, in_flight={"http://a.org/": NOW}, page_limit=3)
    gone = apply_to_host(host, cmd(Op.HOST_DELETE, host="a.org"))
    assert gone == HostRecord(key="a.org", operator_log=[cmd(Op.HOST_DELETE, host="a.org").log_entry()])


def test_an_old_host_record_without_operator_fields_still_decodes() -> None:
    host = HostRecord.from_dict({"key": "example.org", "delay_s": 1.0})
    assert host.operator_delay_s is None and host.page_limit is None and host.operator_log == []


def test_an_operator_block_holds_the_host_until_its_end_minus_the_lead() -> None:
    host = apply_to_host(HostRecord(key="a.org"), cmd(Op.HOST_BLOCK, host="a.org", until_s=NOW + 20))
    assert host.eligible_at_s(600.0, NOW, ahead=2, lead_s=0.5) == NOW + 19.5
    assert host.pace().blocked_until_s == NOW + 20
    unblocked = apply_to_host(host, cmd(Op.HOST_UNBLOCK, host="a.org"))
    assert unblocked.eligible_at_s(600.0, NOW, ahead=2, lead_s=0.5) <= NOW


def test_a_page_limit_caps_the_places_and_parks_the_host_once_reached() -> None:
    host = apply_to_host(HostRecord(key="a.org", delay_s=0.1), cmd(Op.HOST_LIMIT, host="a.org", pages=5))
    assert host.places(ahead=8, lead_s=0.5) == 5
    host = HostRecord.from_dict({**host.to_dict(), "pages_fetched": 4})
    assert host.places(ahead=8, lead_s=0.5) == 1
    full = HostRecord.from_dict({**host.to_dict(), "pages_fetched": 5})
    assert full.places(ahead=8, lead_s=0.5) == 0
    assert full.eligible_at_s(600.0, NOW, ahead=8, lead_s=0.5) == INF
    raised = apply_to_host(full, cmd(Op.HOST_LIMIT, host="a.org", pages=10))
    assert raised.eligible_at_s(600.0, NOW, ahead=8, lead_s=0.5) < INF
    assert limit_reached(full, in_flight=1) and not limit_reached(raised, in_flight=5)


def test_the_operators_delay_replaces_the_configured_one_and_crawl_delay_still_applies_on_top() -> None:
    config = pace_config_of(delay_s=1.0)
    mine = PaceState(operator_delay_s=3.0)
    assert delay_in_force(config, None, mine, NOW) == 3.0
    assert delay_in_force(config, 5.0, mine, NOW) == 5.0  # the site's Crawl-delay is longer: it wins
    assert delay_in_force(config, None, PaceState(operator_delay_s=0.2), NOW) == 0.2  # may also speed a host up
    ended = after_fetch(mine, FetchEnded(fetch_id="f", kind=SignalKind.SUCCESS, at_s=NOW), config)
    assert ended.next_fetch_at_s == NOW + 3.0


def test_a_raised_delay_applies_to_the_gap_already_running() -> None:
    pace = PaceState(next_fetch_at_s=NOW + 1.0, delay_s=1.0)
    host = HostRecord(key="a.org", operator_delay_s=3.0)
    steered = steer_pace(pace, host)
    assert (steered.next_fetch_at_s, steered.delay_s, steered.operator_delay_s) == (NOW + 3.0, 3.0, 3.0)
    lowered = steer_pace(steered, HostRecord(key="a.org", operator_delay_s=0.5))
    assert lowered.next_fetch_at_s == NOW + 3.0  # never sooner than already promised


def test_crawl_commands_pause_resume_and_set_the_default_delay() -> None:
    crawl = apply_to_crawl(CrawlControl(), cmd(Op.CRAWL_PAUSE))
    assert crawl.paused
    crawl = apply_to_crawl(crawl, cmd(Op.CRAWL_DELAY, delay_s=2.0))
    crawl = apply_to_crawl(crawl, cmd(Op.CRAWL_RESUME))
    assert not crawl.paused and crawl.delay_s == 2.0
    assert CrawlControl.from_dict(json.loads(json.dumps(crawl.to_dict()))) == crawl
    assert CrawlControl.from_dict("garbage") == CrawlControl()
    config = pace_config_of(delay_s=1.0)
    assert pace_config(config, crawl).server_delay_s == 2.0
    assert pace_config(config, CrawlControl()) is config


def test_a_url_arriving_at_the_fetcher_goes_back_when_paused_or_blocked_beyond_the_lead() -> None:
    assert hand_back_at(PaceState(), paused=True, now_s=NOW, lead_s=0.5) == NOW
    blocked = PaceState(operator_blocked_until_s=NOW + 20)
    assert hand_back_at(blocked, paused=False, now_s=NOW, lead_s=0.5) == NOW + 20
    assert hand_back_at(PaceState(operator_blocked_until_s=NOW + 0.2), paused=False, now_s=NOW, lead_s=0.5) is None
    assert hand_back_at(PaceState(), paused=False, now_s=NOW, lead_s=0.5) is None


def _args(*argv: str) -> argparse.Namespace:
    from squall.cli.main import build_parser

    return build_parser().parse_args(list(argv))


def test_the_cli_builds_the_command_it_sends() -> None:
    c = build_command(_args("host", "block", "Example.org", "--for", "2h", "--reason", "complaint", "--by", "bob"), NOW)
    assert (c.op, c.host, c.until_s, c.reason, c.by) == (Op.HOST_BLOCK, "example.org", NOW + 7200, "complaint", "bob")
    assert build_command(_args("host", "limit", "a.org", "none"), NOW).pages is None
    assert build_command(_args("host", "delay", "a.org", "default"), NOW).delay_s is None
    assert build_command(_args("crawl", "delay", "2.5s"), NOW).delay_s == 2.5
    assert "@" in build_command(_args("crawl", "pause"), NOW).by  # user@machine by default


@pytest.mark.parametrize(
    "argv",
    [
        ("host", "block", "bad host", "--for", "2h"),
        ("host", "block", "a.org", "--for", "soon"),
        ("host", "block", "a.org", "--until", "tomorrow"),
        ("host", "delay", "a.org", "fast"),
        ("host", "limit", "a.org", "-1"),
    ],
)
def test_the_cli_refuses_a_malformed_command_with_one_line_and_exit_2_before_sending(
    argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    from squall.cli.main import main

    assert main(list(argv)) == 2  # no broker here: a send would fail otherwise
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nothing sent" in err, err


def pace_config_of(delay_s: float):
    from squall.policy.pace import PaceConfig

    return PaceConfig.from_settings(settings_of({"fetcher.server.delay": delay_s}))


def test_squall_hosts_shows_the_delay_in_force_and_why_the_block_the_limit_and_what_it_holds() -> None:
    from squall.cli.frontier import host_rows, host_text

    limited = apply_to_host(HostRecord(key="a.org", delay_s=1.0), cmd(Op.HOST_LIMIT, host="a.org", pages=2))
    limited = HostRecord.from_dict({**limited.to_dict(), "pages_fetched": 2})
    blocked = apply_to_host(
        HostRecord(key="b.org", delay_s=4.0), cmd(Op.HOST_BLOCK, host="b.org", until_s=NOW + 60, reason="complaint")
    )
    slowed = apply_to_host(HostRecord(key="c.org"), cmd(Op.HOST_DELAY, host="c.org", delay_s=3.0))
    urls = {
        "http://a.org/": {"key": "a.org", "status": "FETCHED"},
        "http://a.org/1": {"key": "a.org", "status": "FETCHED"},
        "http://a.org/2": {"key": "a.org", "status": "DISCOVERED"},
        "http://a.org/3": {"key": "a.org", "status": "DISCOVERED"},
        "http://b.org/": {"key": "b.org", "status": "DISCOVERED"},
    }
    hosts = {h.key: h.to_dict() for h in (limited, blocked, slowed)}
    crawl = {"crawl:0": CrawlControl(paused=True).to_dict()}
    rows = {r["host"]: r for r in host_rows(hosts, urls, crawl, 1, 1.0, NOW)}
    assert (rows["a.org"]["held_by_limit"], rows["a.org"]["delay_why"]) == (2, "fetcher.server.delay")
    assert (rows["b.org"]["blocked_until_s"], rows["b.org"]["block_reason"]) == (NOW + 60, "complaint")
    assert rows["b.org"]["delay_why"] == "Crawl-delay"  # 4 s recorded, above the configured 1 s
    assert (rows["c.org"]["delay_s"], rows["c.org"]["delay_why"]) == (3.0, "host.delay")
    assert all(r["paused"] and r["partition"] == 0 for r in rows.values())
    text = host_text(rows["a.org"])
    assert "2 held by the limit" in text and "limit 2/2 pages" in text and "host.limit by alice@box" in text


def test_a_frontier_dump_is_a_seed_file_that_reads_back_to_the_same_urls_and_metadata() -> None:
    from squall.cli.frontier import dump_lines
    from squall.cli.seed import parse_seed_lines
    from squall.policy.urls import NormalizerConfig

    urls = {
        "http://a.org/": {"status": "FETCHED", "metadata": {"src": ["x", "y"], "note": ["tab\there"]}},
        "http://a.org/b": {"status": "DISCOVERED"},
    }
    lines = list(dump_lines(urls))
    assert lines[0] == "http://a.org/\tnote=tab here\tsrc=x\tsrc=y"
    parsed = list(parse_seed_lines(lines, NormalizerConfig.from_settings(settings_of({}))))
    assert [(s.url, s.metadata) for s in parsed] == [
        ("http://a.org/", {"note": ["tab here"], "src": ["x", "y"]}),
        ("http://a.org/b", {}),
    ]
    assert list(dump_lines(urls, "DISCOVERED")) == ["http://a.org/b"]


def test_squall_status_shows_the_last_operator_command_next_to_its_host_and_counts_held_urls_apart() -> None:
    from squall.cli.status_counts import build_report

    limited = apply_to_host(HostRecord(key="a.org"), cmd(Op.HOST_LIMIT, host="a.org", pages=1))
    limited = HostRecord.from_dict({**limited.to_dict(), "pages_fetched": 1})
    urls = {
        "http://a.org/": {"key": "a.org", "status": "FETCHED"},
        "http://a.org/x": {"key": "a.org", "status": "DISCOVERED", "next_fetch_at_s": NOW - 5},
        "http://b.org/": {"key": "b.org", "status": "DISCOVERED", "next_fetch_at_s": NOW - 5},
    }
    report = build_report(urls, {"a.org": limited.to_dict()}, NOW)
    assert (report.held, report.due_now) == (1, 1)  # a.org's is held by the limit, b.org's is due
    text = report.to_text()
    assert "  a.org: host.limit by alice@box at " in text and "(pages=1)" in text, text
    assert "held by an operator's page limit: 1 URLs" in text
    row = next(r for r in report.hosts if r["host"] == "a.org")
    assert (row["page_limit"], row["pages_fetched"]) == (1, 1)


def test_squall_status_says_which_partitions_are_paused_and_by_whom() -> None:
    from squall.cli.status_counts import build_report, paused_partitions

    pause = cmd(Op.CRAWL_PAUSE)
    control = {
        "crawl:0": apply_to_crawl(CrawlControl(), pause).to_dict(),
        "crawl:1": CrawlControl().to_dict(),
        "crawl:2": apply_to_crawl(CrawlControl(), pause).to_dict(),
    }
    paused = paused_partitions(control)
    assert sorted(paused) == [0, 2] and paused[0].startswith("crawl.pause by alice@box at ")
    report = build_report({}, {}, NOW)
    report.paused = paused
    assert "PAUSED: partitions [0, 2] (crawl.pause by alice@box" in report.to_text()
    assert report.to_json()["paused"] == paused


def test_only_a_signal_that_frees_its_hand_out_after_a_request_counts_a_page() -> None:
    from squall.policy.host_pacing import apply_signal
    from squall.policy.records import SignalMessage

    config = pace_config_of(delay_s=1.0)
    host = HostRecord(key="a.org").with_handout(["http://a.org/1", "http://a.org/2"], NOW)

    def signal(url: str, fid: str, requested: bool = True) -> SignalMessage:
        return SignalMessage(key="a.org", url=url, fetch_id=fid, kind=SignalKind.SUCCESS, at_s=NOW + 1,
                             requested=requested, handed_out_at_s=NOW)

    host = apply_signal(host, signal("http://a.org/1", "f1"), config, 16)
    host = apply_signal(host, signal("http://a.org/1", "f1"), config, 16)  # re-delivered
    host = apply_signal(host, signal("http://a.org/2", "f2", requested=False), config, 16)  # robots denial
    host = apply_signal(host, signal("http://a.org/other", "f3"), config, 16)  # not a hand-out of this host
    assert host.pages_fetched == 1 and host.in_flight == {}
