"""Metadata persist and transfer (StormCrawler ``metadata.persist`` / ``metadata.transfer``).

Metadata is a mapping of key → list of strings. Patterns are key names where a
trailing ``*`` matches any suffix (``robots.*`` matches ``robots.crawl.delay``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

Metadata = Mapping[str, list[str]]


def key_matches(pattern: str, key: str) -> bool:
    """True if ``key`` is named by ``pattern`` (exact, or prefix when it ends in ``*``)."""
    if pattern.endswith("*"):
        return key.startswith(pattern[:-1])
    return key == pattern


def select(metadata: Metadata, patterns: Iterable[str]) -> dict[str, list[str]]:
    """The entries of ``metadata`` whose key matches one of ``patterns``."""
    patterns = tuple(patterns)
    return {k: list(v) for k, v in metadata.items() if any(key_matches(p, k) for p in patterns)}


def for_outlink(parent: Metadata, transfer: Iterable[str]) -> dict[str, list[str]]:
    """Metadata an outlink inherits from its parent page (``metadata.transfer``).

    ``robots.crawl.delay`` is never inherited, whatever the patterns say (seed
    000: an outlink must not inherit its parent host's delay).
    """
    out = select(parent, transfer)
    out.pop("robots.crawl.delay", None)
    return out


def for_record(previous: Metadata, incoming: Metadata, persist: Iterable[str]) -> dict[str, list[str]]:
    """Metadata kept in a URL record: the previous entries updated by the persisted incoming ones."""
    out = {k: list(v) for k, v in previous.items()}
    out.update(select(incoming, persist))
    return out


def parse_mapping(entries: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """``indexer.md.mapping`` entries → ((metadata key, document field), ...), in order.

    StormCrawler's form: ``key=field``; an entry without ``=`` keeps its
    name (``crawl`` is ``crawl=crawl``). Spaces around either side are
    ignored.

    Raises:
        ValueError: an entry with an empty key or field (e.g. ``=title``).
    """
    out: list[tuple[str, str]] = []
    for entry in entries:
        key, sep, name = str(entry).partition("=")
        key, name = key.strip(), (name.strip() if sep else key.strip())
        if not key or not name:
            raise ValueError(f"{entry!r} is not 'key=field'")
        out.append((key, name))
    return tuple(out)


def mapped(metadata: Metadata, mapping: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """The document fields ``mapping`` (:func:`parse_mapping`) makes of ``metadata``; absent keys are left out.

    Two keys mapped to one field have their values joined, in mapping order.
    """
    out: dict[str, list[str]] = {}
    for key, name in mapping:
        values = metadata.get(key)
        if values:
            out.setdefault(name, []).extend(str(v) for v in values)
    return out
