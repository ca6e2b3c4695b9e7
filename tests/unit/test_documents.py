"""Tests of squall.policy.documents: text, language, fingerprint, noindex reasons, mapping and the codec."""

from __future__ import annotations

import hashlib
import json

import pytest

from squall.errors import MessageError
from squall.net.warc import payload_digest
from squall.policy import documents
from squall.policy.documents import (
    Document,
    DocumentsConfig,
    Skip,
    build,
    extract,
    language_confidence,
    noindex_reason,
    simhash64,
)
from squall.policy.metadata import mapped, parse_mapping
from squall.policy.parse import parse_html
from tests.unit.settings_helper import settings_of
from tests.unit.texts import TEXTS, UNIQUE, page

CONFIG = DocumentsConfig(text_max_chars=-1, mapping=(), agent_token="squall")


def _recorded(html: str, headers=()) -> dict[str, list[str]]:
    """The parse step's recorded metadata for ``html`` (the keys agents.parser records)."""
    parsed = parse_html(html.encode(), url="http://site.test/p", headers=headers, agent_token="squall")
    out = {"parse.charset": [parsed.charset]}
    if parsed.noindex:
        out["parse.noindex"] = ["true"]
    if parsed.title:
        out["parse.title"] = [parsed.title]
    if parsed.canonical:
        out["parse.canonical"] = [parsed.canonical]
    return out


# ---------------------------------------------------------------- text and language


@pytest.mark.parametrize("language", ["en", "de", "fr"])
def test_the_language_of_a_few_hundred_words_is_detected_with_some_confidence(language):
    text = extract(page(language, title="T").encode()).language
    assert text == language
    assert extract(page(language, title="T").encode()).language_rank < 1200


def test_main_text_keeps_the_article_and_drops_navigation_and_footer():
    got = extract(page("en", title="Lighthouse", nav_links=30).encode())
    assert UNIQUE["en"] in got.text
    assert "Menu item" not in got.text
    assert "Copyright footer boilerplate" not in got.text


def test_a_page_whose_main_content_is_not_recognised_gives_its_visible_text():
    got = extract(b"<html><body><div>only a short line of text here</div></body></html>")
    assert got.text.strip() == "only a short line of text here"


def test_description_and_outlinks_are_read_from_the_page():
    html = (
        '<html><head><META NAME="Description" content="  the   page  "></head><body>'
        '<a href="/a">a</a><a href="#top">top</a><a href="">empty</a><a>no href</a>'
        '<a href="/b" rel="nofollow">b</a><map><area href="/c"></map><a href="http://x.test/">x</a>'
        "</body></html>"
    )
    got = extract(html.encode())
    assert got.description == "the page"
    assert got.outlinks == 3  # /a, the area, the absolute one


@pytest.mark.parametrize(
    ("links", "count"),
    [
        ('<a href=" #top">', 0),  # a fragment padded with white space
        ('<a href="  ">', 0),
        ('<a href="\t\n">', 0),
        ('<area href="\f#x">', 0),
        ('<a href=" /a ">', 1),
        ('<a href="/a" rel="External NoFollow">', 0),  # rel tokens, case-insensitive
        ('<a href="/a" rel="nofollowed">', 1),
        ('<a href="/x#y">', 1),
        ('<a href=" /a" rel="nofollow"><a href=" #"><a href="/b">', 1),
    ],
)
def test_an_outlink_is_counted_on_its_href_stripped_of_white_space(links, count):
    assert extract(f"<html><body>{links}</body></html>".encode()).outlinks == count


def test_the_page_charset_decodes_the_body_and_an_unknown_one_reads_as_utf8():
    latin = "<html><body><p>Grüße aus Köln</p></body></html>".encode("cp1252")
    assert "Grüße aus Köln" in extract(latin, "cp1252").text
    assert "Grüße" in extract("<p>Grüße</p>".encode(), "no-such-codec").text


@pytest.mark.parametrize(
    "body", [b"", b"\x00\x00\x00", b"<<<>>>&&&", b"\xff\xfe\xfa garbage", b"<html><body>" + b"<div>" * 5000]
)
def test_garbage_never_raises(body):
    got = extract(body)
    assert isinstance(got.text, str)
    assert got.language_rank >= 0


@pytest.mark.parametrize(
    ("rank", "language", "confidence"),
    [(0, "en", 1.0), (600, "en", 0.5), (1200, "en", 0.0), (5000, "en", 0.0), (0, "unknown", 0.0)],
)
def test_language_confidence_reads_the_rank_against_the_cutoff(rank, language, confidence):
    assert language_confidence(rank, language) == confidence


# ---------------------------------------------------------------- fingerprint


def _distance(a: int, b: int) -> int:
    return bin(a ^ b).count("1")


def test_simhash_is_stable_and_ignores_case_order_and_repeats():
    text = TEXTS["en"]
    assert simhash64(text) == simhash64(text)
    assert simhash64("Alpha beta gamma") == simhash64("gamma GAMMA alpha beta beta")
    assert simhash64("") == 0
    assert simhash64("  ...  ") == 0


def test_a_near_duplicate_is_close_and_another_text_is_far():
    text = TEXTS["en"]
    edited = text.replace("lighthouse", "beacon", 1) + " One more closing remark."
    assert _distance(simhash64(text), simhash64(edited)) <= 8
    assert _distance(simhash64(text), simhash64(TEXTS["de"])) >= 16


def _majority_of_hashes(words: list[str]) -> int:
    """The simhash rule written plainly: bit i set when more than half of the words' hashes have it."""
    hashes = [int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little") for w in words]
    return sum(1 << i for i in range(64) if 2 * sum((h >> i) & 1 for h in hashes) > len(hashes))


@pytest.mark.parametrize("words", [["word"], ["alpha", "beta"], ["alpha", "beta", "gamma"], TEXTS["en"].split()[:40]])
def test_simhash_bits_are_the_majority_of_the_word_hashes(words):
    distinct = sorted({w.lower().strip(".,;:!?()") for w in words} - {""})
    assert simhash64(" ".join(words)) == _majority_of_hashes(distinct)


def test_the_word_hash_cache_does_not_change_a_fingerprint():
    text = TEXTS["fr"]
    warm = simhash64(text)
    documents._word_hash.cache_clear()
    assert simhash64(text) == warm


def test_simhash_of_a_single_word_is_its_hash_bits():
    # one word: every bit set in its hash is set in more than half of the hashes
    assert simhash64("word") == simhash64("word word")
    assert simhash64("word") != 0


# ---------------------------------------------------------------- noindex

NOINDEX_CASES = [
    # (meta, X-Robots-Tag, expected reason)
    ("", None, None),
    ('<meta name="robots" content="noindex">', None, Skip.NOINDEX_META),
    ('<meta name="robots" content="none">', None, Skip.NOINDEX_META),
    ('<meta name="squall" content="noindex">', None, Skip.NOINDEX_META),
    ('<meta name="otherbot" content="noindex">', None, None),
    ('<meta name="robots" content="nofollow">', None, None),
    ("", "noindex", Skip.NOINDEX_HEADER),
    ("", "squall: noindex", Skip.NOINDEX_HEADER),
    ("", "otherbot: noindex", None),
    ('<meta name="robots" content="noindex">', "noindex, nofollow", Skip.NOINDEX_HEADER),
]


@pytest.mark.parametrize(("meta", "header", "reason"), NOINDEX_CASES)
def test_noindex_reason(meta, header, reason):
    html = f"<html><head>{meta}</head><body>text</body></html>"
    headers = [("Content-Type", "text/html")] + ([("X-Robots-Tag", header)] if header else [])
    assert noindex_reason(headers, _recorded(html, headers), "squall") == reason


# ---------------------------------------------------------------- metadata mapping

MAPPING_CASES = [
    (["parse.title=page_title"], (("parse.title", "page_title"),)),
    (["crawl"], (("crawl", "crawl"),)),
    ([" a = b ", "c=d"], (("a", "b"), ("c", "d"))),
    ([], ()),
]


@pytest.mark.parametrize(("entries", "expected"), MAPPING_CASES)
def test_mapping_entries_are_key_equals_field(entries, expected):
    assert parse_mapping(entries) == expected


@pytest.mark.parametrize("entry", ["=title", "key=", " = ", ""])
def test_a_mapping_entry_without_key_or_field_is_refused(entry):
    with pytest.raises(ValueError):
        parse_mapping([entry])


def test_a_bad_mapping_stops_the_settings_with_the_key_named():
    from squall.errors import ConfigError

    with pytest.raises(ConfigError, match=r"indexer\.md\.mapping"):
        settings_of({"indexer.md.mapping": ["=x"]})


def test_mapped_copies_present_keys_and_joins_two_keys_of_one_field():
    metadata = {"a": ["1"], "b": ["2", "3"], "c": ["4"]}
    assert mapped(metadata, (("a", "x"), ("b", "x"), ("missing", "y"))) == {"x": ["1", "2", "3"]}


# ---------------------------------------------------------------- the document


def _document(html: str, config: DocumentsConfig = CONFIG, metadata=None) -> Document:
    body = html.encode()
    return build(
        url="http://site.test/p",
        fetched_at_s=1700000000.25,
        http_status=200,
        content_type="text/html",
        recorded=_recorded(html),
        page=extract(body),
        payload_digest=payload_digest(body),
        metadata=metadata or {},
        rendered=False,
        config=config,
    )


def test_a_document_carries_every_field_and_round_trips():
    html = page("fr", title="Le train", extra_head='<link rel="canonical" href="/canon">')
    doc = _document(
        html,
        DocumentsConfig(-1, parse_mapping(["parse.title=page_title", "crawl"]), "squall"),
        metadata={"crawl": ["c1"]},
    )
    assert doc.title == "Le train"
    assert doc.canonical == "http://site.test/canon"
    assert doc.language == "fr" and 0 < doc.language_confidence <= 1
    assert doc.description == "Le train description"
    assert doc.outlinks == 8
    assert doc.payload_digest == payload_digest(html.encode())
    assert len(doc.simhash) == 16 and int(doc.simhash, 16) == simhash64(extract(html.encode()).text)
    assert doc.metadata == {"page_title": ["Le train"], "crawl": ["c1"]}
    assert Document.from_bytes(doc.to_bytes()) == doc
    assert json.loads(doc.to_bytes())["fetched_at_s"] == 1700000000.25


def test_text_is_cut_at_indexer_text_maxlength_and_marked():
    doc = _document(page("en", title="T"), DocumentsConfig(50, (), None))
    assert len(doc.text) == 50 and doc.text_truncated
    whole = _document(page("en", title="T"))
    assert not whole.text_truncated and len(whole.text) > 50
    assert doc.simhash == whole.simhash  # the fingerprint is of the whole text


def test_the_config_comes_from_the_stormcrawler_keys():
    s = settings_of({"indexer.text.maxlength": 10, "indexer.md.mapping": ["a=b"]})
    assert DocumentsConfig.from_settings(s) == DocumentsConfig(10, (("a", "b"),), None)


@pytest.mark.parametrize("raw", [b"", b"[]", b'{"url": 1}', b"not json", b'{"text": "x"}'])
def test_a_bad_document_message_is_a_message_error(raw):
    with pytest.raises(MessageError):
        Document.from_bytes(raw)


def test_a_page_that_is_a_list_of_links_gives_its_whole_text_not_only_its_heading():
    links = "".join(f'<li><a href="/m/{i}">module number {i} reference</a></li>' for i in range(40))
    got = extract(f"<html><body><h1>Index</h1><table><tr><td><ul>{links}</ul></td></tr></table></body></html>".encode())
    assert "module number 39 reference" in got.text


def test_with_documents_off_a_worker_never_imports_the_extraction_library():
    import subprocess
    import sys

    from squall.settings import ROOT

    probe = "import sys, topology; print(sorted(m for m in sys.modules if m.startswith(('resiliparse', 'tantivy'))))"
    run = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "SQUALL_CONF": str(ROOT / "config" / "crawler-default.yaml")},
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
