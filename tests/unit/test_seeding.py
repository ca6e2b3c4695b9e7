"""Tests of squall.cli.seed.parse_seed_lines (StormCrawler FileSpout format): bad lines reported, the rest seeded."""

from __future__ import annotations

from dataclasses import replace

import pytest

from squall.cli.seed import SeedLine, parse_seed_lines
from squall.settings import load_settings
from squall.policy.urls import NormalizerConfig

# The defaults file's normalizer with no query parameter removed (each test names what it removes).
NO_REMOVALS = replace(NormalizerConfig.from_settings(load_settings()), query_remove=())

NORMALIZER = replace(NO_REMOVALS, query_remove=("utm_*",))


def parse(text: str) -> list[SeedLine]:
    return list(parse_seed_lines(text.splitlines(keepends=True), NORMALIZER))


def test_blank_and_comment_lines_are_skipped_and_line_numbers_count_every_line_of_the_file():
    seeds = parse("# seeds\n\nhttps://example.com/\n   \n  # indented comment\nhttps://example.org/a\n")
    assert seeds == [SeedLine(3, url="https://example.com/", metadata={}),
                     SeedLine(6, url="https://example.org/a", metadata={})]


def test_urls_are_canonicalized():
    [seed] = parse("  HTTPS://Example.COM:443/a/./b?utm_source=x&q=1  \n")
    assert seed.url == "https://example.com/a/b?q=1"


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("not a url", "url.malformed"),
        ("ftp://example.com/file", "url.scheme"),
        ("https://user:pw@example.com/", "url.userinfo"),
        ("https:///nohost", "url.host"),
        ("https://example.com/" + "a" * 3000, "url.too_long"),
    ],
)
def test_a_malformed_url_is_reported_with_its_line_number_and_reason_and_the_rest_still_parse(line, reason):
    seeds = parse(f"https://example.com/1\n{line}\nhttps://example.com/3\n")
    assert [s.lineno for s in seeds] == [1, 2, 3]
    bad = seeds[1]
    assert bad.url is None and bad.metadata is None
    assert reason in bad.error
    assert [s.url for s in seeds if s.error is None] == ["https://example.com/1", "https://example.com/3"]


def test_tab_separated_key_value_pairs_become_metadata_lists():
    [seed] = parse("https://example.com/\tsource=feed\tsource=sitemap\tnote=a=b\tempty=\n")
    assert seed.error is None
    assert seed.metadata == {"source": ["feed", "sitemap"], "note": ["a=b"], "empty": [""]}


@pytest.mark.parametrize("pair", ["novalue", "=value", " =value"])
def test_a_bad_metadata_pair_is_reported_with_its_line_number(pair):
    seeds = parse(f"https://example.com/ok\nhttps://example.com/\t{pair}\n")
    assert seeds[0].error is None
    assert seeds[1].lineno == 2
    assert seeds[1].url is None
    assert "key=value" in seeds[1].error and repr(pair) in seeds[1].error


def test_parsing_never_raises_on_garbage():
    lines = ["\x00\x01", "https://exa mple.com/", "http://[::1", "\t\t", "https://example.com/\t\t", "💥"]
    seeds = list(parse_seed_lines(lines, NORMALIZER))
    assert all((s.url is None) != (s.error is None) for s in seeds)
    assert [s.lineno for s in seeds] == sorted(s.lineno for s in seeds)


def test_a_seed_with_a_credential_is_refused_with_a_message_saying_why():
    [bad] = parse("https://user:secret@example.com/private\n")
    assert bad.url is None
    assert "url.userinfo" in bad.error and "a seed must not carry user:password@" in bad.error
    assert "secret" not in bad.error and "//***@example.com" in bad.error
