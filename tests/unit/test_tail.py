"""squall.cli.tail: topic names and message decoding (never raises on bad bytes)."""

from __future__ import annotations

import json

import pytest

from squall.settings import load_settings
from squall.cli.tail import decode, format_line, resolve_topic

SETTINGS = load_settings(overrides={"topology.id": "demo"})


@pytest.mark.parametrize("name,topic", [("status", "demo-status"), ("ticks", "demo-ticks"),
                                        ("deadletter", "demo-deadletter"), ("urls", "demo-urls-changelog"),
                                        ("audit", "demo-audit-changelog"), ("other-topic", "other-topic")])
def test_a_suffix_or_a_table_names_the_topology_topic(name: str, topic: str) -> None:
    assert resolve_topic(SETTINGS, name) == topic


@pytest.mark.parametrize("key,value,expected", [
    (b"example.org", b'{"url": "https://example.org/"}', {"key": "example.org", "value": {"url": "https://example.org/"},
                                                          "json": True}),
    (b"tick", b'{"partition": 1, "sent_at_s": 2.5}', {"key": "tick", "value": {"partition": 1, "sent_at_s": 2.5},
                                                       "json": True}),
    (b"k", None, {"key": "k", "value": None, "json": True}),                       # a tombstone
    (None, b"", {"key": None, "value": "", "json": False}),                        # an old empty tick
    (b"\xff", b"\xff\xfe not json", {"key": "\ufffd", "value": "\ufffd\ufffd not json", "json": False}),
])
def test_messages_are_decoded_and_non_json_is_flagged(key, value, expected) -> None:
    assert decode(key, value) == expected


def test_a_printed_line_names_topic_partition_offset_and_key() -> None:
    line = format_line("demo-status", 3, 42, 0, decode(b"example.org", b'{"url":"https://example.org/"}'))
    assert " demo-status[3]@42 example.org " in line
    assert json.loads(line.split(" example.org ", 1)[1]) == {"url": "https://example.org/"}
    assert format_line("t", 0, 0, None, decode(b"k", b"x")).endswith("(not JSON)")


def test_an_unknown_topic_is_named_with_the_topology_topics_that_exist() -> None:
    from squall.cli.tail import unknown_topic_message

    existing = ["demo-status", "demo-ticks", "demo-urls-changelog", "demo-__assignor-__leader", "other", "__consumer_offsets"]
    assert unknown_topic_message("statuss", existing, "demo") == (
        "topic statuss not found; topology.id 'demo' has: status, ticks, urls"
    )
    assert unknown_topic_message("demo-status", ["other", "__consumer_offsets"], "demo") == (
        "topic demo-status not found; no topic of topology.id 'demo' exists (the broker has: other)"
    )
    assert unknown_topic_message("x", [], "demo").endswith("(the broker has none)")
