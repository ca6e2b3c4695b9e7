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
