"""Documents of fetched HTML pages: main text, language, fingerprint, the noindex rule and the record's codec.

What StormCrawler's IndexerBolt sends to an index, built from one page the
parse step has read. Pure: bytes, headers and metadata in, a frozen
:class:`Document` out; no I/O, never raises on bad bytes or broken markup.

Sources of the rules:

* noindex: Google's robots meta tag specification, read once by
  :func:`squall.policy.parse.parse_html` (``parse.noindex``); the
  ``X-Robots-Tag`` header is read again here only to name the reason
  (:func:`noindex_reason`).
* main text: Resiliparse's ``extract_plain_text(main_content=True)``
  (its boilerplate heuristics: navigation, headers, footers, sidebars
  dropped); a page where it keeps less than ``MAIN_TEXT_MIN_CHARS`` (a
  list of links: an index, a table of contents) gives its whole visible text.
* language: Resiliparse's ``detect_fast`` (out-of-place rank against 101
  profiles; above 1200 the library calls the result usually false).
* fingerprint: Charikar's simhash (STOC 2002) of the text's distinct words,
  64 bits, as used for near-duplicate web pages by Manku, Jain and Das
  Sarma (WWW 2007): pages whose fingerprints differ in at most 3 bits are
  near-duplicates.
* metadata mapping: StormCrawler's ``indexer.md.mapping``
  (:func:`squall.policy.metadata.parse_mapping`); text cap:
  ``indexer.text.maxlength``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import string
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.html import HTMLTree
from resiliparse.parse.lang import detect_fast

from squall.errors import MessageError
from squall.policy.codec import field_values, loads
from squall.policy.metadata import mapped, parse_mapping
from squall.policy.parse import robots_directives

if TYPE_CHECKING:
    from squall.settings import Settings

__all__ = [
    "Document",
    "DocumentsConfig",
    "PageText",
    "Skip",
    "build",
    "extract",
    "language_confidence",
    "noindex_reason",
    "simhash64",
]

# Characters of text the language is detected on (from the start). detect_fast is linear in its input
# (about 10 µs per 1 000 characters); on pages of lists (indexes, tables of contents) of identifiers
# the first few thousand characters mislead it where the whole text does not.
LANGUAGE_SAMPLE_CHARS = 100_000
# A main text shorter than this (characters) is replaced by the page's whole visible text when that is
# longer: main-content heuristics drop link-dense blocks, and on a page that is a list of links (a
# site index, a table of contents) they leave only its heading.
MAIN_TEXT_MIN_CHARS = 200
# detect_fast's default cutoff: a rank above it is "usually a false result" (its documentation).
LANGUAGE_RANK_CUTOFF = 1200
# Characters stripped from both ends of a white-space-separated token to make it a word (ASCII and common
# typographic punctuation: quotes, dashes, ellipsis, guillemets).
_PUNCTUATION = string.punctuation + "«»‹›„“”‚‘’—–…·¡¿"
# Simhash: for bit b of a byte, the table that maps a byte to 1 when its bit b is set, else to 0
# (bytes.translate with it, then bytes.count(1), counts a column of hashes in C).
_BIT_OF_BYTE = tuple(bytes((value >> b) & 1 for value in range(256)) for b in range(8))
# Words whose hash is kept between pages: the words of one language repeat from page to page (Zipf's
# law), so most of a page's words are found here. A bounded LRU cache: about 4 MB when full.
WORD_HASH_CACHE = 32_768
# Links a document counts (see _outlinks): <a> and <area> with an href that is not empty, not a
# fragment only and not rel=nofollow. Counted by lexbor's selector engine: a Python object per
# element (what iterating the elements costs) is made only for an href that starts with white space.
_LINK_SELECTOR = ", ".join(
    f'{tag}[href]:not([href=""]):not([href^="#"]):not([rel~="nofollow" i])' for tag in ("a", "area")
)
# HTML's ASCII white space (https://infra.spec.whatwg.org/#ascii-whitespace); in the selector each
# character is a CSS escape (its code point in hex and a space, CSS Syntax Level 3 §4.3.7).
_ASCII_WHITESPACE = " \t\n\f\r"
_PADDED_LINK_SELECTOR = ", ".join(
    f'{tag}[href^="\\{ord(c):x} "]:not([rel~="nofollow" i])' for tag in ("a", "area") for c in _ASCII_WHITESPACE
)


class Skip(StrEnum):
    """Why a FETCHED HTML page gave no document (the ``outcome`` label of ``squall_documents``)."""

    NOINDEX_HEADER = "noindex.header"  # an X-Robots-Tag for all agents or for squall's token says noindex
    NOINDEX_META = "noindex.meta"  # <meta name="robots"> (or squall's token) says noindex


@dataclass(frozen=True)
class DocumentsConfig:
    """Settings of the documents: ``text_max_chars`` (-1 = no cap), the metadata mapping, squall's robots token."""

    text_max_chars: int
    mapping: tuple[tuple[str, str], ...]
    agent_token: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings, agent_token: str | None = None) -> DocumentsConfig:
        """From ``indexer.text.maxlength`` and ``indexer.md.mapping`` (checked at start by the settings rules)."""
        return cls(settings.indexer_text_maxlength, parse_mapping(settings.indexer_md_mapping), agent_token)


@dataclass(frozen=True)
class PageText:
    """What the text extraction read from a page.

    ``text``: main text, whitespace collapsed within lines, paragraphs on
    their own lines. ``description``: ``<meta name="description">`` content,
    None when absent or empty. ``outlinks``: ``<a>`` / ``<area>`` elements
    with an ``href`` that is not empty, not fragment-only and not
    ``rel=nofollow`` (links as written: before resolution, de-duplication
    and scope). ``language``: ISO 639-1 code, ``"unknown"`` when no profile
    matched (detected on the first 100 000 characters); ``language_rank``: detect_fast's out-of-place rank (lower is surer).
    """

    text: str
    description: str | None
    outlinks: int
    language: str
    language_rank: int


@dataclass(frozen=True)
class Document:
    """One JSON message of the documents topic (:meth:`to_bytes` / :meth:`from_bytes`).

    ``url``: the canonical URL fetched. ``fetched_at_s``: Unix seconds when the
    response ended. ``http_status``: the status code; ``content_type``: the
    response's mime type. ``title``: ``<title>`` (``parse.title``), None when
    absent. ``text``: main text, at most ``indexer.text.maxlength`` characters
    (``text_truncated`` when cut). ``language`` / ``language_confidence``
    (0..1: 1 − rank / 1200, see :func:`language_confidence`). ``description``,
    ``canonical`` (absolute ``rel=canonical`` target), ``outlinks`` (count,
    :class:`PageText`). ``payload_digest``: ``sha1:<base32>``, the response
    record's ``WARC-Payload-Digest``. ``simhash``: 16 hex digits
    (:func:`simhash64`). ``metadata``: the ``indexer.md.mapping`` fields.
    ``rendered``: the text is the browser-rendered DOM's.
    """

    url: str
    fetched_at_s: float
    http_status: int
    content_type: str | None
    title: str | None
    text: str
    text_truncated: bool
    language: str
    language_confidence: float
    description: str | None
    canonical: str | None
    outlinks: int
    payload_digest: str
    simhash: str
    metadata: dict[str, list[str]] = field(default_factory=dict)
    rendered: bool = False

    def to_bytes(self) -> bytes:
        """Compact UTF-8 JSON (non-ASCII text kept as is).

        The fields as they are (:func:`squall.policy.codec.field_values`).
        """
        return json.dumps(field_values(self), ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_bytes(cls, raw: bytes) -> Document:
        """Decode a message of the documents topic.

        Raises:
            MessageError: not JSON, not an object, or a required field missing or of the wrong type.
        """
        try:
            data = loads(raw)
            if not isinstance(data, dict):
                raise TypeError("not a JSON object")
            doc = cls(**{k: data[k] for k in _FIELDS if k in data})
            if not isinstance(doc.url, str) or not isinstance(doc.text, str):
                raise TypeError("url and text must be strings")
            return doc
        except (ValueError, TypeError, KeyError) as exc:
            raise MessageError(f"bad document: {exc}") from None


_FIELDS = tuple(Document.__dataclass_fields__)


def noindex_reason(
    headers: Iterable[tuple[str, str]], recorded: Mapping[str, list[str]], agent_token: str | None
) -> Skip | None:
    """Why the page must not be indexed, or None.

    ``recorded``: the parse step's metadata (``parse.noindex`` is ``["true"]``
    when meta robots or X-Robots-Tag said noindex); ``headers``: the
    response's, read again only to tell the header's reason from the meta tag's.
    """
    for name, value in headers:
        if name.lower() == "x-robots-tag" and "noindex" in robots_directives(value, agent_token, header=True):
            return Skip.NOINDEX_HEADER
    if recorded.get("parse.noindex") == ["true"]:
        return Skip.NOINDEX_META
    return None


def extract(body: bytes, charset: str = "utf-8") -> PageText:
    """Main text, description, link count and language of an HTML page; never raises.

    ``charset``: the codec the parse step decoded the page with
    (``parse.charset``); an unknown one reads as UTF-8; bad bytes are replaced.
    """
    try:
        html = bytes(body).decode(charset, "replace")
    except LookupError:
        html = bytes(body).decode("utf-8", "replace")
    try:
        tree = HTMLTree.parse(html.replace("\x00", ""))
        text = extract_plain_text(tree, main_content=True)
        if len(text) < MAIN_TEXT_MIN_CHARS:  # a link list (an index page): its links are its content
            text = max(text, extract_plain_text(tree), key=len)
        description = _description(tree)
        outlinks = _outlinks(tree)
    except Exception:  # lexbor refuses the input: an empty page, not a dead worker
        text, description, outlinks = "", None, 0
    language, rank = _language(text)
    return PageText(text=text, description=description, outlinks=outlinks, language=language, language_rank=rank)


def build(
    *,
    url: str,
    fetched_at_s: float,
    http_status: int,
    content_type: str | None,
    recorded: Mapping[str, list[str]],
    page: PageText,
    payload_digest: str,
    metadata: Mapping[str, list[str]],
    rendered: bool,
    config: DocumentsConfig,
) -> Document:
    """The document of one page: the parse step's ``recorded`` facts (``parse.title``, ``parse.canonical``), the text's.

    ``metadata``: the URL's metadata (the hand-out's, updated by ``recorded``),
    mapped by ``config.mapping``.
    """
    text = page.text
    cut = 0 <= config.text_max_chars < len(text)
    if cut:
        text = text[: config.text_max_chars]
    return Document(
        url=url,
        fetched_at_s=fetched_at_s,
        http_status=http_status,
        content_type=content_type,
        title=_first(recorded, "parse.title"),
        text=text,
        text_truncated=cut,
        language=page.language,
        language_confidence=language_confidence(page.language_rank, page.language),
        description=page.description,
        canonical=_first(recorded, "parse.canonical"),
        outlinks=page.outlinks,
        payload_digest=payload_digest,
        simhash=f"{simhash64(page.text):016x}",
        metadata=mapped({**metadata, **recorded}, config.mapping),
        rendered=rendered,
    )


def language_confidence(rank: int, language: str = "") -> float:
    """0..1 from detect_fast's rank: 1 − rank / 1200, clamped, 3 decimals; 0 for ``unknown``.

    Not a probability: a monotone reading of the rank against the cutoff
    above which the library calls its result usually false.
    """
    if language == "unknown":
        return 0.0
    return round(min(1.0, max(0.0, 1.0 - rank / LANGUAGE_RANK_CUTOFF)), 3)


def simhash64(text: str) -> int:
    """64-bit simhash of the distinct lower-case words of ``text`` (0 for a text without words).

    Words: white-space-separated tokens with punctuation stripped from both ends.
    Each word is hashed (BLAKE2b, 8 bytes: stable across processes, unlike
    ``hash()``; the last ``WORD_HASH_CACHE`` words' hashes are kept); bit i
    of the fingerprint (bit i % 8 of byte i // 8 of the little-endian
    hashes) is set when more than half of the words' hashes have bit i set.
    Distinct words, unweighted: a repeated boilerplate word weighs no more
    than any other.
    """
    # split on white space, then strip punctuation from each distinct token: several times cheaper than a
    # \w+ regex over the whole text, and the same words for prose (a set: the sum does not depend on order)
    words = {t.strip(_PUNCTUATION) for t in set(text.lower().split())}
    words.discard("")
    if not words:
        return 0
    # the hashes side by side; byte j of every hash is then the slice hashes[j::8], and the count of
    # those with bit b set is a translate and a count, in C, not a step per word
    hashes = b"".join(map(_word_hash, words))
    majority = len(words) // 2  # more than half: a count above this
    out = 0
    for j in range(8):
        column = hashes[j::8]
        for b, bit_of_byte in enumerate(_BIT_OF_BYTE):
            if column.translate(bit_of_byte).count(1) > majority:
                out |= 1 << (8 * j + b)
    return out


@functools.lru_cache(maxsize=WORD_HASH_CACHE)
def _word_hash(word: str) -> bytes:
    """The 8-byte BLAKE2b hash of ``word`` (UTF-8; a lone surrogate passes through)."""
    return hashlib.blake2b(word.encode("utf-8", "surrogatepass"), digest_size=8).digest()


def _first(metadata: Mapping[str, list[str]], key: str) -> str | None:
    values = metadata.get(key)
    return str(values[0]) if values else None


def _language(text: str) -> tuple[str, int]:
    sample = unicodedata.normalize("NFC", text[:LANGUAGE_SAMPLE_CHARS])
    try:
        language, rank = detect_fast(sample, cutoff=LANGUAGE_RANK_CUTOFF)
    except Exception:
        return "unknown", 0
    return str(language), int(rank)


def _description(tree: Any) -> str | None:
    head = tree.head
    if head is None:
        return None
    for meta in head.get_elements_by_tag_name("meta").values():
        if (meta.getattr("name") or "").strip().lower() == "description":
            content = " ".join((meta.getattr("content") or "").split())
            return content or None
    return None


def _outlinks(tree: Any) -> int:
    """Count the links of ``_LINK_SELECTOR``, their href read with its white space stripped (HTML's)."""
    document = tree.document
    count = len(document.query_selector_all(_LINK_SELECTOR))
    # the selector reads the href as written: one padded with white space counts only when what the
    # white space surrounds is neither empty nor a fragment (rare: these few become Python objects)
    for node in document.query_selector_all(_PADDED_LINK_SELECTOR).values():
        href = (node.getattr("href") or "").strip(_ASCII_WHITESPACE)
        if not href or href.startswith("#"):
            count -= 1
    return count
