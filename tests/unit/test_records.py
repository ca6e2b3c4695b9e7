"""Tests of squall.policy.records: the JSON messages of the status, fetch, signals and ticks topics (lenient shape, strict types)."""

from __future__ import annotations

import json

import pytest

from squall.errors import MessageError
from squall.policy.records import FetchMessage, SignalKind, SignalMessage, StatusMessage, TickMessage
from squall.policy.reasons import Reason, ReasonCategory, Status

NOW = 1_714_564_800.0  # the fake clock


def encode(obj) -> bytes:
    return json.dumps(obj).encode()


# ---------------------------------------------------------------- StatusMessage.from_bytes


def test_a_minimal_seed_is_a_discovered_url_with_every_default():
    msg = StatusMessage.from_bytes(b'{"url": "https://example.com/"}')
    assert msg == StatusMessage(url="https://example.com/")
    assert (msg.status, msg.depth, msg.metadata, msg.seed, msg.chain) == (Status.DISCOVERED, 0, {}, False, [])


def test_unknown_extra_fields_are_ignored():
    assert StatusMessage.from_bytes(encode({"url": "u", "future": 1})) == StatusMessage(url="u")


def test_explicit_nulls_take_the_defaults():
    assert StatusMessage.from_bytes(encode({"url": "u", "depth": None, "seed": None})) == StatusMessage(url="u")


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"not json",
        b'{"url": "u"',
        b"\xff\xfe\x00",          # not UTF-8
        b'["https://example.com/"]',
        b'"https://example.com/"',
        b"null",
        b"42",
        b"{}",
        b'{"url": ""}',
        b'{"url": 42}',
        b'{"url": null}',
        b'{"URL": "https://example.com/"}',
    ],
)
def test_a_message_that_is_not_an_object_with_a_url_is_refused(raw):
    with pytest.raises(MessageError):
        StatusMessage.from_bytes(raw)


@pytest.mark.parametrize("status", ["fetched", "DONE", "", 1])
def test_an_unknown_status_is_refused(status):
    with pytest.raises(MessageError, match="status"):
        StatusMessage.from_bytes(encode({"url": "u", "status": status}))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("depth", "1"),
        ("depth", 1.5),
        ("depth", True),           # a JSON boolean is not an int
        ("http_status", "200"),
        ("http_status", False),
        ("priority", 1.0),
        ("fetched_at_s", "now"),
        ("retry_after_s", [1]),
        ("seed", "true"),
        ("seed", 1),
        ("not_modified", 0),
        ("truncated", "no"),
        ("reason", 404),
        ("redirect_to", {"u": 1}),
        ("etag", 1),
        ("last_modified", 1),
        ("chain", "https://example.com/"),
        ("fetched_at_s", True),
        ("retry_after_s", False),
        ("chain", [1, None]),
    ],
)
def test_a_field_of_the_wrong_type_is_refused(field, value):
    with pytest.raises(MessageError):
        StatusMessage.from_bytes(encode({"url": "u", field: value}))


# Messages as the code before typed reasons encoded them: decoding and encoding again gives the same bytes.
WIRE = [
    b'{"url":"https://a.example/x","status":"ERROR","depth":1,"metadata":{},"reason":"robots.denied",'
    b'"fetched_at_s":1796132010.979,"seed":false,"not_modified":false,"truncated":false,"chain":[]}',
    b'{"url":"https://a.example/x","status":"DISCOVERED","depth":1,"metadata":{"k":["v"]},"reason":"robots.unavailable",'
    b'"fetched_at_s":10.5,"seed":false,"retry_after_s":70.5,"not_modified":false,"truncated":false,'
    b'"chain":["https://a.example/"]}',
    b'{"url":"https://a.example/a","status":"DISCOVERED","depth":2,"metadata":{},"seed":false,"not_modified":false,'
    b'"truncated":false,"chain":[],"more_urls":["https://a.example/b"],'
    b'"rejected":{"a.example":{"trap.depth":2,"scope.regex":1}}}',
    b'{"url":"https://a.example/a","status":"FETCH_ERROR","depth":0,"metadata":{},"reason":"http.rate_limited",'
    b'"http_status":429,"fetched_at_s":5,"seed":false,"retry_after_s":65,"not_modified":false,"truncated":false,'
    b'"chain":[]}',
]


WIRE.append(  # a result that carries its signal and its partition's outlinks (one message per page)
    b'{"url":"https://a.example/p","status":"FETCHED","depth":0,"metadata":{},"http_status":200,'
    b'"fetched_at_s":11.5,"seed":false,"not_modified":false,"truncated":false,"chain":[],'
    b'"signal":{"key":"a.example","url":"https://a.example/p","fetch_id":"f1","kind":"success","at_s":11.5,'
    b'"requested":true,"delay_s":1.0,"handed_out_at_s":10.0},'
    b'"discovered":{"url":"https://a.example/a","status":"DISCOVERED","depth":1,"metadata":{},"seed":false,'
    b'"not_modified":false,"truncated":false,"chain":[],"more_urls":["https://a.example/b"]}}'
)


@pytest.mark.parametrize("raw", WIRE, ids=["denied", "unavailable", "batch", "rate_limited", "result+signal+links"])
def test_the_wire_format_is_unchanged_and_reasons_decode_to_the_enum(raw):
    msg = StatusMessage.from_bytes(raw)
    assert msg.to_bytes() == raw
    assert msg.reason is None or isinstance(msg.reason, Reason)
    assert all(isinstance(r, Reason) for counts in msg.rejected.values() for r in counts)


@pytest.mark.parametrize("fields", [
    {"status": "ERROR", "reason": "robots.maybe", "fetched_at_s": 1.0},
    {"status": "ERROR", "reason": "", "fetched_at_s": 1.0},
    {"status": "ERROR", "reason": 404, "fetched_at_s": 1.0},
    {"status": "FETCHED ", "fetched_at_s": 1.0},
    # DISCOVERED with a fetch time is "not attempted": it must say why, with a not-attempted reason
    {"status": "DISCOVERED", "fetched_at_s": 1.0, "retry_after_s": 5.0},
    {"status": "DISCOVERED", "fetched_at_s": 1.0, "reason": "robots.denied"},
    {"status": "DISCOVERED", "fetched_at_s": 1.0, "reason": "http.rate_limited"},
])
def test_an_unknown_reason_or_status_or_an_unexplained_not_attempted_result_is_bad_input(fields):
    with pytest.raises(MessageError):
        StatusMessage.from_bytes(encode({"url": "https://example.com/a", **fields}))


@pytest.mark.parametrize("reason", [Reason.ROBOTS_UNAVAILABLE, Reason.FETCH_DEFERRED, Reason.FETCH_ADDRESS_CHANGED])
def test_a_not_attempted_result_decodes_with_its_reason(reason):
    raw = encode({"url": "u", "status": "DISCOVERED", "fetched_at_s": 1.0, "reason": reason.value})
    assert StatusMessage.from_bytes(raw).reason is reason


def test_every_reason_has_a_category_that_names_its_family():
    family = {"message": ReasonCategory.INPUT, "url": ReasonCategory.URL, "scope": ReasonCategory.SCOPE,
              "trap": ReasonCategory.TRAP, "robots": ReasonCategory.ROBOTS, "crawl_delay": ReasonCategory.ROBOTS,
              "redirect": ReasonCategory.REDIRECT, "http": ReasonCategory.HTTP, "sitemap": ReasonCategory.SITEMAP}
    for reason in Reason:
        expected = family.get(reason.value.split(".")[0])
        if reason.not_attempted and reason is not Reason.ROBOTS_UNAVAILABLE:
            expected = ReasonCategory.NOT_ATTEMPTED
        elif reason.value.startswith("fetch."):
            expected = ReasonCategory.TRANSPORT
        assert reason.category is expected, reason
        assert reason.is_url == (reason.category is ReasonCategory.URL)
        assert reason.is_robots == (reason.category is ReasonCategory.ROBOTS)
        assert Reason(reason.value) is reason and Reason.parse(reason.value) is reason
        assert Reason.of(reason.value) is reason and Reason.of(reason) is reason
        assert f"{reason}" == reason.value  # formatted as its value in messages for people


@pytest.mark.parametrize("value", ["no.such", "FETCH_DNS", "", 3, None])
def test_looking_up_an_unknown_reason_value_raises(value):
    with pytest.raises(ValueError):
        Reason.of(value)
    with pytest.raises(MessageError):
        Reason.parse(value)


def test_robots_unavailable_waits_and_robots_denied_only_means_disallowed():
    assert Reason.ROBOTS_UNAVAILABLE.not_attempted and not Reason.ROBOTS_DENIED.not_attempted
    assert Reason.ROBOTS_UNAVAILABLE.is_robots and Reason.ROBOTS_DENIED.is_robots
    assert {r for r in Reason if r.not_attempted} == {Reason.ROBOTS_UNAVAILABLE, Reason.FETCH_DEFERRED,
                                                      Reason.FETCH_ADDRESS_CHANGED}


def test_a_result_decodes_its_signal_and_its_outlinks_as_messages():
    msg = StatusMessage.from_bytes(WIRE[-1])
    assert msg.signal == SignalMessage(key="a.example", url="https://a.example/p", fetch_id="f1",
                                       kind=SignalKind.SUCCESS, at_s=11.5, delay_s=1.0, handed_out_at_s=10.0)
    assert msg.discovered is not None and msg.discovered.urls() == ["https://a.example/a", "https://a.example/b"]


SIGNAL = {"key": "a.example", "url": "https://a.example/p", "fetch_id": "f", "kind": "success", "at_s": 1}
LINKS = {"url": "https://a.example/a"}


@pytest.mark.parametrize("fields", [
    {"signal": SIGNAL},  # a discovery carries no signal
    {"discovered": LINKS},  # nor outlinks
    {"fetched_at_s": 1, "status": "FETCHED", "signal": {**SIGNAL, "kind": "fast"}},
    {"fetched_at_s": 1, "status": "FETCHED", "signal": "success"},
    {"fetched_at_s": 1, "status": "FETCHED", "discovered": [LINKS]},
    {"fetched_at_s": 1, "status": "FETCHED", "discovered": {**LINKS, "status": "FETCHED"}},
    {"fetched_at_s": 1, "status": "FETCHED", "discovered": {**LINKS, "fetched_at_s": 1, "status": "FETCHED"}},
    {"fetched_at_s": 1, "status": "FETCHED", "discovered": {"url": 3}},
])
def test_a_signal_or_outlinks_outside_a_result_or_of_the_wrong_shape_is_bad_input(fields):
    with pytest.raises(MessageError):
        StatusMessage.from_bytes(encode({"url": "https://a.example/p", **fields}))


def test_integer_times_are_accepted():
    msg = StatusMessage.from_bytes(encode({"url": "u", "status": "FETCHED", "fetched_at_s": 100, "retry_after_s": 160.5}))
    assert (msg.fetched_at_s, msg.retry_after_s) == (100, 160.5)


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({}, {}),
        ({"k": "v"}, {"k": ["v"]}),             # a single string becomes a one-item list
        ({"k": ["a", "b"]}, {"k": ["a", "b"]}),
        ({"k": []}, {"k": []}),
        ({"a": "1", "b": ["2"]}, {"a": ["1"], "b": ["2"]}),
    ],
)
def test_metadata_is_normalised_to_lists_of_strings(metadata, expected):
    assert StatusMessage.from_bytes(encode({"url": "u", "metadata": metadata})).metadata == expected


@pytest.mark.parametrize("metadata", [["k", "v"], "k=v", 1, {"k": 1}, {"k": [1]}, {"k": ["a", None]}, {"k": None}])
def test_malformed_metadata_is_refused(metadata):
    with pytest.raises(MessageError, match="metadata"):
        StatusMessage.from_bytes(encode({"url": "u", "metadata": metadata}))


# ---------------------------------------------------------------- round trips


def test_a_full_status_message_survives_a_round_trip():
    msg = StatusMessage(url="https://example.com/a", status=Status.FETCH_ERROR, depth=2,
                        metadata={"k": ["v1", "v2"]}, reason=Reason.HTTP_RATE_LIMITED, http_status=429,
                        redirect_to="https://example.com/b", fetched_at_s=NOW, seed=True, retry_after_s=NOW + 30,
                        etag='"e"', last_modified="Wed, 01 May 2024 12:00:00 GMT", priority=3, not_modified=True,
                        truncated=True, chain=["https://example.com/"])
    assert StatusMessage.from_bytes(msg.to_bytes()) == msg


def test_a_default_status_message_encodes_without_nulls_and_round_trips():
    msg = StatusMessage(url="https://example.com/")
    assert b"null" not in msg.to_bytes()
    assert json.loads(msg.to_bytes())["status"] == "DISCOVERED"
    assert StatusMessage.from_bytes(msg.to_bytes()) == msg


def test_a_fetch_message_survives_a_round_trip():
    msg = FetchMessage(url="https://example.com/a", key="example.com", depth=1, metadata={"k": ["v"]}, attempt=2,
                       handed_out_at_s=NOW, etag='"e"', last_modified="d", chain=["https://example.com/"],
                       payload_digest="sha1:ABC", archived_at_s=NOW - 10)
    assert FetchMessage.from_bytes(msg.to_bytes()) == msg
    bare = FetchMessage(url="https://example.com/a", key="example.com")
    assert FetchMessage.from_bytes(bare.to_bytes()) == bare


@pytest.mark.parametrize("raw", [b"nope", b"[]", b'{"url": "u"}', b'{"key": "k"}',
                                 b'{"url": "u", "key": "k", "attempt": "x"}',
                                 b'{"url": "u", "key": "k", "metadata": "m"}'])
def test_a_bad_fetch_message_is_refused(raw):
    with pytest.raises(MessageError):
        FetchMessage.from_bytes(raw)


@pytest.mark.parametrize(
    "msg",
    [
        SignalMessage(key="example.com", url="https://example.com/a", fetch_id="p3-o17", kind=SignalKind.SUCCESS,
                      at_s=NOW, delay_s=1.5),
        SignalMessage(key="example.com", url="https://example.com/a", fetch_id="f", kind=SignalKind.RETRY_AFTER,
                      at_s=NOW, delay_s=0.0, retry_until_s=NOW + 30),
        SignalMessage(key="example.com", url="https://example.com/a", fetch_id="f", kind=SignalKind.OTHER,
                      at_s=NOW, delay_s=30.0, robots_crawl_delay_s=120),
    ],
    ids=["success", "retry-after", "robots-delay"],
)
def test_a_signal_message_survives_a_round_trip(msg):
    assert SignalMessage.from_bytes(msg.to_bytes()) == msg


@pytest.mark.parametrize("raw", [b"nope", b"[]", b'{"key": "k", "url": "u", "fetch_id": "f", "at_s": 1}',
                                 b'{"key": "k", "url": "u", "fetch_id": "f", "kind": "panic", "at_s": 1}',
                                 b'{"key": "k", "url": "u", "fetch_id": "f", "kind": "success", "at_s": "x"}'])
def test_a_bad_signal_message_is_refused(raw):
    with pytest.raises(MessageError):
        SignalMessage.from_bytes(raw)


def test_a_tick_keeps_its_wire_format_and_survives_a_round_trip():
    raw = TickMessage(partition=3, sent_at_s=NOW + 0.1234).to_bytes()
    assert raw == b'{"partition":3,"sent_at_s":%.3f}' % (NOW + 0.1234)  # the bytes the spout wrote by hand
    assert TickMessage.from_bytes(raw) == TickMessage(partition=3, sent_at_s=round(NOW + 0.1234, 3))
    assert TickMessage.from_bytes(b'{"partition":0,"sent_at_s":1714564800.100}') == TickMessage(0, 1714564800.1)


@pytest.mark.parametrize("raw", [b"", b"nope", b"[]", b'{"partition": 1}', b'{"sent_at_s": 1}',
                                 b'{"partition": "x", "sent_at_s": 1}', b'{"partition": 1, "sent_at_s": NaN}'])
def test_a_bad_tick_is_refused(raw):
    with pytest.raises(MessageError):
        TickMessage.from_bytes(raw)


def test_only_final_statuses_are_final():
    assert {s for s in Status if s.final} == {Status.FETCHED, Status.REDIRECTION, Status.ERROR}


# ---------------------------------------------------------------- batches of outlinks (more_urls, rejected)

def test_a_batch_of_outlinks_survives_a_round_trip_and_lists_every_url():
    msg = StatusMessage(url="https://example.com/a", depth=3, metadata={"k": ["v"]},
                        more_urls=["https://example.com/b", "https://example.com/c"],
                        rejected={"example.com": {Reason.TRAP_DEPTH: 2}, "other.example": {Reason.SCOPE_REGEX: 1}})
    assert StatusMessage.from_bytes(msg.to_bytes()) == msg
    assert json.loads(msg.to_bytes())["rejected"] == {"example.com": {"trap.depth": 2}, "other.example": {"scope.regex": 1}}
    assert msg.urls() == ["https://example.com/a", "https://example.com/b", "https://example.com/c"]


def test_a_message_without_a_batch_encodes_no_batch_fields():
    obj = json.loads(StatusMessage(url="https://example.com/").to_bytes())
    assert "more_urls" not in obj and "rejected" not in obj


def test_the_hand_built_encoding_matches_the_dataclass_fields():
    msg = StatusMessage(url="u", status=Status.FETCHED, fetched_at_s=NOW, chain=["c"])
    obj = json.loads(msg.to_bytes())
    assert obj == {"url": "u", "status": "FETCHED", "depth": 0, "metadata": {}, "fetched_at_s": NOW, "seed": False,
                   "not_modified": False, "truncated": False, "chain": ["c"]}


@pytest.mark.parametrize("fields", [
    {"more_urls": "https://example.com/b"},
    {"more_urls": ["https://example.com/b", 3]},
    {"more_urls": [""]},
    {"more_urls": ["https://example.com/b"], "status": "FETCHED"},
    {"more_urls": ["https://example.com/b"], "fetched_at_s": NOW},
    {"rejected": ["trap.depth"]},
    {"rejected": {"trap.depth": 1}},
    {"rejected": {"example.com": {"trap.depth": 0}}},
    {"rejected": {"example.com": {"trap.depth": True}}},
    {"rejected": {"example.com": {"not.a.reason": 1}}},
    {"rejected": {"": {"trap.depth": 1}}},
])
def test_a_malformed_batch_is_refused(fields):
    with pytest.raises(MessageError):
        StatusMessage.from_bytes(encode({"url": "https://example.com/a", **fields}))


def test_a_result_carries_its_payload_digest_and_archive_date():
    msg = StatusMessage(url="https://example.com/a", status=Status.FETCHED, fetched_at_s=NOW, http_status=200,
                        payload_digest="sha1:ABC", archived_at_s=NOW - 1)
    assert StatusMessage.from_bytes(msg.to_bytes()) == msg
    with pytest.raises(MessageError):
        StatusMessage.from_bytes(b'{"url": "https://example.com/a", "payload_digest": 5}')
