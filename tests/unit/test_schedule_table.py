"""Tests of squall.policy.schedule's transition table, every cell, and of the URL record itself: JSON, config, who sets its status."""

from __future__ import annotations

import ast
import json
import pathlib
from dataclasses import replace

import pytest
import yaml

from squall.policy.reasons import Reason, Status
from squall.policy.records import StatusMessage
from squall.policy.schedule import Incoming, ScheduleConfig, UrlRecord, apply, kind_of
from squall.settings import DEFAULTS_FILE, load_settings
from tests.unit.schedule_helper import KEY, MIN, NOW, URL, result

# ---------------------------------------------------------------- serialisation and config


def test_a_url_record_survives_a_json_round_trip():
    rec = UrlRecord(
        url=URL,
        key=KEY,
        status=Status.FETCH_ERROR,
        depth=2,
        priority=1,
        attempts=3,
        fetch_errors=2,
        next_fetch_at_s=NOW + 1,
        last_fetch_at_s=NOW,
        discovered_at_s=NOW - 5,
        reason=Reason.FETCH_TIMEOUT,
        http_status=None,
        redirect_to=None,
        etag='"e"',
        last_modified="d",
        metadata={"k": ["v1", "v2"]},
        chain=["https://example.com/"],
    )
    d = rec.to_dict()
    assert d["status"] == "FETCH_ERROR"
    assert type(d["reason"]) is str and d["reason"] == "fetch.timeout"  # the table holds the values
    again = UrlRecord.from_dict(json.loads(json.dumps(d)))
    assert again == rec and again.reason is Reason.FETCH_TIMEOUT


@pytest.mark.parametrize(("field", "value"), [("status", "LOST"), ("reason", "fetch.maybe")])
def test_a_stored_record_with_an_unknown_status_or_reason_raises_value_error(field, value):
    d = {**UrlRecord(url=URL, key=KEY).to_dict(), field: value}
    with pytest.raises(ValueError):
        UrlRecord.from_dict(d)


def test_schedule_config_converts_stormcrawler_minutes_to_seconds(tmp_path):
    conf = tmp_path / "conf.yaml"
    conf.write_text(
        "fetchInterval.default: 60\nfetchInterval.fetch.error: 2.5\nfetchInterval.error: -1\nmax.fetch.errors: 5\n"
    )
    config = ScheduleConfig.from_settings(load_settings(conf))
    assert config == ScheduleConfig(
        default_interval_s=3600.0,
        fetch_error_interval_s=150.0,
        error_interval_s=None,
        max_fetch_errors=5,
        max_rate_limits=20,
        changefreq_revisit=True,
    )


def test_schedule_config_from_the_defaults_follows_the_defaults_file(tmp_path):
    conf = tmp_path / "empty.yaml"
    conf.write_text("{}\n")
    defaults = yaml.safe_load(DEFAULTS_FILE.read_text())
    config = ScheduleConfig.from_settings(load_settings(conf))
    assert config.default_interval_s == defaults["fetchInterval.default"] * 60.0
    assert config.max_fetch_errors == defaults["max.fetch.errors"]
    if defaults["fetchInterval.error"] < 0:
        assert config.error_interval_s is None


# ---------------------------------------------------------------- the transition table, every cell

# A config where every interval is finite, so each "next fetch" rule is visible.
TABLE_CONFIG = ScheduleConfig(
    default_interval_s=1440 * MIN,
    fetch_error_interval_s=120 * MIN,
    error_interval_s=720 * MIN,
    max_fetch_errors=3,
    max_rate_limits=4,
    changefreq_revisit=False,
)
LAST = NOW - 3600.0  # the record's previous fetch (a result at NOW is newer)
RETRY = NOW + 900.0  # the retry_after_s a message carries

# incoming kind → (message, record fields before, expected status (None: unchanged), expected reason
# ("same": the message's), next fetch rule, attempts added)
NEXT = {
    "retry_after": lambda: RETRY,
    "default": lambda: NOW + TABLE_CONFIG.default_interval_s,
    "fetch_error": lambda: NOW + TABLE_CONFIG.fetch_error_interval_s,
    "error": lambda: NOW + TABLE_CONFIG.error_interval_s,
}
TRANSITIONS = [
    (
        "not attempted: robots.txt unavailable",
        Incoming.NOT_ATTEMPTED,
        result(Status.DISCOVERED, NOW, reason=Reason.ROBOTS_UNAVAILABLE, retry_after_s=RETRY),
        {},
        None,
        "same",
        "retry_after",
        0,
    ),
    (
        "not attempted: deferred",
        Incoming.NOT_ATTEMPTED,
        result(Status.DISCOVERED, NOW, reason=Reason.FETCH_DEFERRED, retry_after_s=RETRY),
        {},
        None,
        "same",
        "retry_after",
        0,
    ),
    (
        "not attempted: address changed",
        Incoming.NOT_ATTEMPTED,
        result(Status.DISCOVERED, NOW, reason=Reason.FETCH_ADDRESS_CHANGED, retry_after_s=RETRY),
        {},
        None,
        "same",
        "retry_after",
        0,
    ),
    ("fetched", Incoming.FETCHED, result(Status.FETCHED, NOW, http_status=200), {}, Status.FETCHED, None, "default", 1),
    (
        "redirection",
        Incoming.REDIRECTION,
        result(Status.REDIRECTION, NOW, http_status=301, redirect_to="https://example.com/b"),
        {},
        Status.REDIRECTION,
        None,
        "default",
        1,
    ),
    (
        "rate limited",
        Incoming.RATE_LIMITED,
        result(Status.FETCH_ERROR, NOW, http_status=429, reason=Reason.HTTP_RATE_LIMITED, retry_after_s=RETRY),
        {},
        None,
        "same",
        "retry_after",
        1,
    ),
    (
        "rate limited, the max.rate.limits-th",
        Incoming.RATE_LIMITED,
        result(Status.FETCH_ERROR, NOW, http_status=503, reason=Reason.HTTP_RATE_LIMITED, retry_after_s=RETRY),
        {"rate_limits": 3},
        Status.ERROR,
        Reason.HTTP_RATE_LIMITED_TOO_MANY,
        "error",
        1,
    ),
    (
        "transient failure",
        Incoming.FETCH_ERROR,
        result(Status.FETCH_ERROR, NOW, reason=Reason.FETCH_TIMEOUT),
        {},
        Status.FETCH_ERROR,
        "same",
        "fetch_error",
        1,
    ),
    (
        "transient failure, the max.fetch.errors-th",
        Incoming.FETCH_ERROR,
        result(Status.FETCH_ERROR, NOW, http_status=500, reason=Reason.HTTP_SERVER_ERROR),
        {"fetch_errors": 2},
        Status.ERROR,
        Reason.FETCH_TOO_MANY_ERRORS,
        "error",
        1,
    ),
    (
        "permanent failure",
        Incoming.ERROR,
        result(Status.ERROR, NOW, http_status=404, reason=Reason.HTTP_NOT_FOUND),
        {},
        Status.ERROR,
        "same",
        "error",
        1,
    ),
    (
        "policy rejection (no request)",
        Incoming.ERROR,
        result(Status.ERROR, NOW, reason=Reason.ROBOTS_DENIED),
        {},
        Status.ERROR,
        "same",
        "error",
        0,
    ),
]


def _record_in(status: Status, **fields) -> UrlRecord:
    return UrlRecord(
        url=URL,
        key=KEY,
        status=status,
        attempts=5,
        next_fetch_at_s=NOW,
        last_fetch_at_s=LAST,
        discovered_at_s=LAST - 60,
        reason=Reason.FETCH_DNS if status is not Status.DISCOVERED else None,
        **fields,
    )


@pytest.mark.parametrize("from_status", list(Status), ids=[s.value for s in Status])
@pytest.mark.parametrize(
    ("name", "kind", "msg", "before", "to_status", "reason", "next_rule", "added"),
    TRANSITIONS,
    ids=[row[0] for row in TRANSITIONS],
)
def test_every_transition_follows_the_table(from_status, name, kind, msg, before, to_status, reason, next_rule, added):
    record = _record_in(from_status, **before)
    assert kind_of(msg) is kind
    new = apply(record, msg, TABLE_CONFIG)
    assert new.status is (from_status if to_status is None else to_status)
    assert new.reason is (msg.reason if reason == "same" else reason)
    assert new.next_fetch_at_s == NEXT[next_rule]()
    assert new.attempts == record.attempts + added
    assert new.last_fetch_at_s == NOW
    assert apply(new, msg, TABLE_CONFIG) is new  # and its re-delivery changes nothing


@pytest.mark.parametrize("from_status", list(Status), ids=[s.value for s in Status])
def test_a_plain_discovery_of_a_known_url_changes_nothing_whatever_its_status(from_status):
    record = _record_in(from_status)
    for msg in (StatusMessage(url=URL), StatusMessage(url=URL, status=Status.FETCHED, http_status=200)):
        assert kind_of(msg) is Incoming.DISCOVERY  # no fetched_at_s: a discovery, whatever the status says
        assert apply(record, msg, TABLE_CONFIG) is record


@pytest.mark.parametrize("from_status", list(Status), ids=[s.value for s in Status])
@pytest.mark.parametrize(
    ("name", "kind", "msg", "before", "to_status", "reason", "next_rule", "added"),
    TRANSITIONS,
    ids=[row[0] for row in TRANSITIONS],
)
def test_a_result_older_than_the_last_fetch_changes_nothing_in_any_cell(
    from_status, name, kind, msg, before, to_status, reason, next_rule, added
):
    record = replace(_record_in(from_status, **before), last_fetch_at_s=NOW)
    assert apply(record, msg, TABLE_CONFIG) is record


def test_the_table_has_a_row_for_every_incoming_kind_and_kind_of_covers_every_status():
    assert {row[1] for row in TRANSITIONS} | {Incoming.DISCOVERY} == set(Incoming)
    for status in Status:
        assert kind_of(StatusMessage(url=URL, status=status)) is Incoming.DISCOVERY
        reason = Reason.ROBOTS_UNAVAILABLE if status is Status.DISCOVERED else None
        assert isinstance(kind_of(StatusMessage(url=URL, status=status, fetched_at_s=NOW, reason=reason)), Incoming)


def _status_writes(path) -> list[str]:
    """``status=`` keywords of ``UrlRecord(...)`` / ``replace(...)`` calls in one source file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("UrlRecord", "replace")
            and any(k.arg == "status" for k in node.keywords)
        ):
            found.append(f"{path.name}:{node.lineno} {node.func.id}(status=...)")
    return found


def test_no_code_but_the_transition_function_sets_a_url_records_status():
    root = pathlib.Path(__file__).resolve().parents[2]
    files = [*(root / "squall").rglob("*.py"), *(root / "agents").glob("*.py"), *(root / "topology").glob("*.py")]
    found = [w for f in files if f.name != "schedule.py" for w in _status_writes(f)]
    # the one other status= write is on a *message*: a fetched sitemap that cannot be read ends ERROR
    assert found == [w for w in found if w.startswith("sitemaps.py:") and "replace" in w]
    assert len(found) == 1, found


def test_a_record_knows_whether_a_hand_outs_result_is_in():
    record = UrlRecord(url="https://example.com/", key="example.com", last_fetch_at_s=100.0)
    assert record.reported_since(99.5) and record.reported_since(100.0)
    assert not record.reported_since(100.5)
    assert not UrlRecord(url="https://example.com/", key="example.com").reported_since(0.0)
