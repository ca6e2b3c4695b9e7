"""Tests of squall.policy.metadata (StormCrawler metadata.persist / metadata.transfer; a robots delay is never inherited by outlinks)."""

from __future__ import annotations

import pytest

from squall.policy.metadata import for_outlink, for_record, key_matches, select

KEY_CASES = [
    # pattern, key, matches
    ("depth", "depth", True),
    ("depth", "depth.max", False),       # exact unless it ends in *
    ("depth", "dept", False),
    ("Depth", "depth", False),           # case-sensitive
    ("robots.*", "robots.crawl.delay", True),
    ("robots.*", "robots.", True),
    ("robots.*", "robots", False),
    ("robots.crawl*", "robots.crawl.delay", True),
    ("*", "anything", True),
    ("*", "", True),
    ("a*b", "a*b", True),                # only a trailing * is a wildcard
    ("a*b", "axb", False),
    ("", "", True),
    ("", "x", False),
]


@pytest.mark.parametrize(("pattern", "key", "expected"), KEY_CASES)
def test_key_matches_is_exact_or_a_prefix_for_a_trailing_star(pattern, key, expected):
    assert key_matches(pattern, key) is expected


PAGE = {"depth": ["2"], "robots.crawl.delay": ["120"], "robots.noindex": ["true"], "source": ["feed", "sitemap"]}


@pytest.mark.parametrize(
    ("patterns", "expected_keys"),
    [
        ([], set()),
        (["depth"], {"depth"}),
        (["robots.*"], {"robots.crawl.delay", "robots.noindex"}),
        (["depth", "source", "missing"], {"depth", "source"}),
        (["*"], set(PAGE)),
        (("depth" for _ in range(2)), {"depth"}),  # any iterable, even a generator
    ],
)
def test_select_keeps_the_entries_whose_key_matches_a_pattern(patterns, expected_keys):
    got = select(PAGE, patterns)
    assert got == {k: PAGE[k] for k in expected_keys}


def test_select_copies_the_value_lists():
    got = select(PAGE, ["source"])
    got["source"].append("x")
    assert PAGE["source"] == ["feed", "sitemap"]


@pytest.mark.parametrize("transfer", [["robots.crawl.delay"], ["robots.*"], ["robots.crawl*"], ["*"], ["depth", "*"]])
def test_an_outlink_never_inherits_the_robots_crawl_delay(transfer):
    got = for_outlink(PAGE, transfer)
    assert "robots.crawl.delay" not in got
    assert "robots.crawl.delay" in PAGE  # the parent keeps it


def test_an_outlink_inherits_the_other_transferred_keys():
    assert for_outlink(PAGE, ["*"]) == {"depth": ["2"], "robots.noindex": ["true"], "source": ["feed", "sitemap"]}
    assert for_outlink(PAGE, ["source"]) == {"source": ["feed", "sitemap"]}
    assert for_outlink(PAGE, []) == {}


def test_a_record_keeps_its_metadata_and_takes_the_persisted_incoming_entries():
    previous = {"seed.tag": ["a"], "robots.crawl.delay": ["10"]}
    incoming = {"robots.crawl.delay": ["120"], "transient": ["x"]}
    got = for_record(previous, incoming, ["robots.crawl.delay"])
    assert got == {"seed.tag": ["a"], "robots.crawl.delay": ["120"]}
    assert previous == {"seed.tag": ["a"], "robots.crawl.delay": ["10"]}


def test_a_record_without_persist_patterns_keeps_only_its_previous_metadata():
    assert for_record({"a": ["1"]}, {"b": ["2"]}, []) == {"a": ["1"]}
    got = for_record({"a": ["1"]}, {}, ["*"])
    got["a"].append("2")
    assert for_record({"a": ["1"]}, {}, ["*"]) == {"a": ["1"]}  # a copy, not the caller's list
