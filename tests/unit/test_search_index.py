"""Tests of squall.index.SearchIndex: one document per URL, ranked search with snippets, the schema's tokenizer."""

from __future__ import annotations

import pytest

from squall.errors import SearchIndexError
from squall.index import SearchIndex, group_id
from squall.policy.documents import Document
from tests.unit.texts import TEXTS, UNIQUE


def doc(url: str, text: str, *, title: str = "T", language: str = "en") -> Document:
    return Document(
        url=url, fetched_at_s=1.0, http_status=200, content_type="text/html", title=title, text=text,
        text_truncated=False, language=language, language_confidence=0.8, description=None, canonical=None,
        outlinks=0, payload_digest="sha1:X", simhash="0" * 16,
    )


@pytest.fixture
def index(tmp_path):
    idx = SearchIndex(tmp_path / "index", writable=True)
    for lang, text in TEXTS.items():
        idx.put(doc(f"http://site.test/{lang}", text, title=f"page {lang}", language=lang))
    idx.commit()
    yield idx
    idx.close()


@pytest.mark.parametrize("lang", ["en", "de", "fr"])
def test_a_phrase_only_one_page_has_finds_that_page_alone(index, lang):
    hits = index.search(f'"{UNIQUE[lang]}"')
    assert [(h.url, h.language, h.title) for h in hits] == [(f"http://site.test/{lang}", lang, f"page {lang}")]
    assert "[" in hits[0].snippet and "]" in hits[0].snippet


def test_every_word_must_match_unless_or_is_said(index):
    assert [h.url for h in index.search("lighthouse Bäckerei")] == []
    assert {h.url for h in index.search("lighthouse OR Bäckerei")} == {"http://site.test/en", "http://site.test/de"}


def test_a_document_put_again_replaces_the_earlier_one_of_its_url(index):
    index.put(doc("http://site.test/en", "entirely new words about zeppelins", title="new"))
    index.put(doc("http://site.test/en", "entirely new words about zeppelins", title="newer"))
    index.commit()
    assert index.count() == 3
    assert [h.title for h in index.search("zeppelins")] == ["newer"]
    assert index.search(f'"{UNIQUE["en"]}"') == []


def test_a_query_the_parser_refuses_is_read_leniently(index):
    assert isinstance(index.search('"unclosed phrase AND'), list)
    assert isinstance(index.search("title:"), list)


def test_a_second_writer_on_the_same_directory_is_refused(index, tmp_path):
    with pytest.raises(SearchIndexError):
        SearchIndex(tmp_path / "index", writable=True)
    assert SearchIndex(tmp_path / "index").count() == 3  # readers are fine


def test_the_consumer_group_is_named_after_the_topology():
    assert group_id("demo") == "demo-index"


def test_snippet_highlights_mark_whole_words_after_non_ascii_text(tmp_path):
    idx = SearchIndex(tmp_path / "i", writable=True)
    idx.put(doc("http://site.test/x", "Python » 3.11 • Dokumentation über Größe: the documentation is here"))
    idx.commit()
    (hit,) = idx.search("documentation")
    assert "[documentation]" in hit.snippet and "» 3.11 •" in hit.snippet
    idx.close()
