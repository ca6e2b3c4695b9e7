"""Names of squall's topics and table changelogs for a topology id (``topology.id``).

One place for the naming scheme, used by :mod:`topology` (the worker) and by
the command line (``squall seed``, ``squall status``), which must agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TOPIC_SUFFIXES = ("status", "fetch", "signals", "ticks", "deadletter")
TABLES = ("urls", "hosts", "robots", "audit")


def topic_name(settings: Mapping[str, Any], suffix: str) -> str:
    """``<topology.id>-<suffix>``, e.g. ``squall-status``."""
    return f"{settings['topology.id']}-{suffix}"


def changelog_name(settings: Mapping[str, Any], table: str) -> str:
    """Faust's changelog topic of ``table``: ``<topology.id>-<table>-changelog``."""
    return f"{settings['topology.id']}-{table}-changelog"


def all_topics(settings: Mapping[str, Any]) -> dict[str, int]:
    """Every topic squall uses → its partition count (all ``topology.partitions``)."""
    n = settings["topology.partitions"]
    names = [topic_name(settings, s) for s in TOPIC_SUFFIXES] + [changelog_name(settings, t) for t in TABLES]
    return {name: n for name in names}
