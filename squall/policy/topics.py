"""Names of squall's topics and table changelogs for a topology id (``topology.id``).

One place for the naming scheme, used by :mod:`topology` (the worker) and by
the command line (``squall seed``, ``squall status``), which must agree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from squall.settings import Settings

TOPIC_SUFFIXES = ("status", "fetch", "signals", "ticks", "deadletter", "documents", "control")
TABLES = ("urls", "hosts", "robots", "audit", "control")
AGENT_TOPIC_SUFFIXES = ("status", "fetch", "signals", "ticks", "control")  # the topics the agents consume


def topic_name(settings: Settings, suffix: str) -> str:
    """``<topology.id>-<suffix>``, e.g. ``squall-status``."""
    return f"{settings.topology_id}-{suffix}"


def changelog_name(settings: Settings, table: str) -> str:
    """Faust's changelog topic of ``table``: ``<topology.id>-<table>-changelog``."""
    return f"{settings.topology_id}-{table}-changelog"


def all_topics(settings: Settings) -> dict[str, int]:
    """Every topic squall uses → its partition count (all ``topology.partitions``)."""
    n = settings.topology_partitions
    names = [topic_name(settings, s) for s in TOPIC_SUFFIXES] + [changelog_name(settings, t) for t in TABLES]
    return {name: n for name in names}


def agent_topics(settings: Settings) -> dict[str, int]:
    """The topics the agents consume → their partition count: every partition must be some worker's."""
    return {topic_name(settings, s): settings.topology_partitions for s in AGENT_TOPIC_SUFFIXES}
