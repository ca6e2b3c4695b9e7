"""squall.policy.codec.field_values: a record's fields without asdict's deep copy, and the same JSON as before.

The table values and messages are built from ``field_values``; these tests
pin that each record's JSON is byte for byte what ``dataclasses.asdict``
made of it (so stored values and the wire format did not change), on records
with every container field filled in.
"""

from __future__ import annotations

import dataclasses
import json
from enum import Enum

from squall.policy.audit import HostAudit, Violation
from squall.policy.codec import clean, field_values
from squall.policy.frontier import HostRecord
from squall.policy.reasons import Reason, Status
from squall.policy.records import FetchMessage, SignalKind, SignalMessage
from squall.policy.schedule import UrlRecord


def _json(d: dict) -> bytes:
    return json.dumps(d, separators=(",", ":")).encode()


def _enum_values(d: dict) -> dict:
    return {k: (v.value if isinstance(v, Enum) else v) for k, v in d.items()}


def test_field_values_is_a_new_dict_of_the_fields_as_they_are():
    msg = FetchMessage(url="http://a.test/", key="a.test", metadata={"k": ["v"]}, chain=["http://a.test/x"])
    values = field_values(msg)
    assert list(values) == [f.name for f in dataclasses.fields(FetchMessage)]
    assert values["metadata"] is msg.metadata and values["chain"] is msg.chain  # not copied
    values["url"] = "changed"
    assert msg.url == "http://a.test/" and field_values(msg)["url"] == "http://a.test/"


def test_a_host_record_is_stored_as_asdict_stored_it():
    host = HostRecord(
        key="a.test",
        seeded=True,
        next_fetch_at_s=12.5,
        delay_s=1.0,
        in_flight={"http://a.test/1": 10.0},
        url_count=3,
        rejected={"scope.regex": 2},
        seen_fetch_ids=["f1", "f2"],
        crawl_delay={"requested_s": 2.0},
        backoff={"attempts": 1, "blocked_until_s": 20.0},
        seeded_hosts=["a.test"],
        operator_log=[{"at": 1.0, "op": "host.delay", "by": "me", "args": {"delay_s": 2.0}}],
    )
    before = {**dataclasses.asdict(host), "blocked_until_s": 20.0}
    assert _json(host.to_dict()) == _json(before)


def test_a_url_record_is_stored_as_asdict_stored_it():
    record = UrlRecord(
        url="http://a.test/1",
        key="a.test",
        status=Status.FETCH_ERROR,
        reason=next(iter(Reason)),
        metadata={"k": ["v", "w"]},
        chain=["http://a.test/0"],
        etag='"x"',
    )
    before = _enum_values(dataclasses.asdict(record))
    assert _json(record.to_dict()) == _json(before)


def test_fetch_and_signal_messages_are_the_bytes_asdict_made():
    fetch = FetchMessage(url="http://a.test/", key="a.test", depth=2, metadata={"k": ["v"]}, chain=["http://a.test/x"])
    assert fetch.to_bytes() == _json(clean(dataclasses.asdict(fetch)))
    signal = SignalMessage(
        key="a.test", url="http://a.test/", fetch_id="f1", kind=next(iter(SignalKind)), at_s=3.0, delay_s=1.0
    )
    assert signal.to_bytes() == _json(clean(dataclasses.asdict(signal)))


def test_an_audit_keeps_its_recent_violations_as_objects():
    audit = HostAudit(key="a.test", violations=1, recent=(Violation(1.0, 0.5, 1.0, 0.0),))
    before = {**dataclasses.asdict(audit), "recent": [dataclasses.asdict(v) for v in audit.recent]}
    assert _json(audit.to_dict()) == _json(before)
