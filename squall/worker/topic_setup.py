"""Every topic of the topology in the broker's metadata before a worker joins its consumer group.

Faust assigns only the topics the group leader's metadata lists when it
computes the assignment: a topic created a moment later is left out until
the next rebalance ("Ignoring missing topic"), and a crawl whose ticks topic
nobody consumes never hands a URL out (docs/architecture.md, "Faust facts";
invariant 7). So a worker:

1. creates every topic it declares — the app's topics and its tables'
   changelogs, with their partition counts and the configs Faust would use —
   and waits until the broker lists all of them (:func:`prepare_topics`,
   called by :class:`squall.worker.faust_app.SquallWorker` before anything
   starts); a broker that does not answer or a partition-count mismatch
   stops the worker with one line;
2. after each rebalance compares its assignment with its subscription
   (:func:`missing_from_assignment`): a subscribed topic of which it got no
   partition while it got partitions of others was missing from the leader's
   metadata, and the consumer thread refreshes its metadata and asks to
   rejoin (:mod:`squall.worker.kafka_consumer`).

``SQUALL_TEST_LATE_TOPICS`` (a test hook, never an operator key) widens the
window of that failure: ``ticks,signals:8`` makes Faust's own creation of the
``<id>-ticks`` and ``<id>-signals`` topics happen 8 s late, in the background,
as if the broker's metadata lagged (:func:`late_topics`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from faust.types import TopicT
from mode.utils.times import want_seconds

from squall.errors import ConfigError, KafkaAccessError, KafkaSetupError
from squall.net.kafka_security import Broker
from squall.policy.topics import topic_name

if TYPE_CHECKING:
    from squall.settings import Settings

LATE_TOPICS_ENV = "SQUALL_TEST_LATE_TOPICS"


@dataclass(frozen=True)
class TopicPlan:
    """Topic name → partition count, and topic name → the configs it is created with."""

    partitions: dict[str, int] = field(default_factory=dict)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)


def faust_topic_config(topic: TopicT) -> dict[str, str]:
    """The configs Faust creates ``topic`` with (``cleanup.policy``, ``retention.ms``, the topic's own).

    As faust-streaming 0.15's aiokafka transport (``Transport._topic_config``):
    a changelog is compacted, a windowed one compacted and deleted.
    """
    flags = sorted(flag for flag, on in (("compact", topic.compacting), ("delete", topic.deleting)) if on)
    config: dict[str, str] = {}
    if flags:
        config["cleanup.policy"] = ",".join(flags)
    if topic.retention:
        config["retention.ms"] = str(int(want_seconds(topic.retention) * 1000))
    config.update({k: str(v) for k, v in (topic.config or {}).items()})
    return config


def plan_of(topics: Mapping[str, int], faust_topics: Iterable[TopicT]) -> TopicPlan:
    """The plan of the app's ``topics`` (name → partitions) and of Faust's own (its tables' changelogs, its
    leader topic), as Faust would create them."""
    plan = TopicPlan(partitions=dict(topics))
    for topic in faust_topics:
        name = topic.get_topic_name()
        plan.partitions[name] = int(topic.partitions or 0)
        plan.configs[name] = faust_topic_config(topic)
    return plan


async def _ensure(bootstrap: Broker, plan: TopicPlan, replication: int) -> None:
    from squall.tools.kafka_admin import ensure_topics

    await ensure_topics(bootstrap, plan.partitions, replication, plan.configs)


def prepare_topics(bootstrap: Broker, plan: TopicPlan, replication: int, topology_id: str) -> None:
    """Create the missing topics of ``plan`` and wait until the broker lists them all (its own event loop).

    Runs before the worker's loop exists (:class:`squall.worker.faust_app.SquallWorker`).
    ``bootstrap`` is a ``host:port,...`` string (PLAINTEXT) or the worker's
    :class:`~squall.net.kafka_security.KafkaConnection` (TLS, SASL).

    Raises:
        SystemExit: one line — no broker answers at ``bootstrap``, the broker
            refused the credentials or a creation (an ACL:
            :class:`~squall.errors.KafkaAccessError`'s line), a topic exists
            with another partition count, or the topics did not appear (the
            broker's own error named); 130 on Ctrl-C.
    """
    loop = asyncio.new_event_loop()
    # logging is not set up yet (Faust does it later): aiokafka's connection errors would reach
    # Python's last-resort handler and print before the one line below
    quiet, client_log = logging.NullHandler(), logging.getLogger("aiokafka")
    client_log.addHandler(quiet)
    try:
        loop.run_until_complete(_ensure(bootstrap, plan, replication))
    except ConfigError as exc:
        raise SystemExit(f"squall: configuration error: {exc}") from None
    except KafkaAccessError as exc:  # as the worker says a refusal anywhere else (squall.worker.faust_app)
        raise SystemExit(f"squall: {exc}") from None
    except KafkaSetupError as exc:
        raise SystemExit(
            f"squall: cannot prepare the topics of topology.id {topology_id!r}: {exc} "
            f"(kafka.bootstrap.servers={bootstrap})"
        ) from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    finally:
        client_log.removeHandler(quiet)
        loop.close()


def missing_from_assignment(
    copartitioned: Iterable[str], subscribed: Iterable[str], assigned: Iterable[tuple[str, int]]
) -> set[str]:
    """Subscribed ``copartitioned`` topics of which no (topic, partition) of ``assigned`` is, when some are.

    squall's topics and changelogs are co-partitioned (one count, one
    subscription), so a member given a partition of one is given that
    partition of every subscribed one; a topic it got nothing of was missing
    from the leader's metadata. A member given none of them (more workers
    than partitions) misses nothing; other topics (Faust's one-partition
    leader topic) are not judged.
    """
    judged = set(copartitioned) & set(subscribed)
    have = {topic for topic, _partition in assigned} & judged
    return judged - have if have else set()


def late_topics(value: str | None) -> tuple[frozenset[str], float]:
    """Parse the ``SQUALL_TEST_LATE_TOPICS`` hook: ``"ticks,signals:8"`` → ({"ticks", "signals"}, 8.0).

    Unset, empty or malformed (no ``:``, a delay that is not a positive number): no topic is late.
    """
    if not value or ":" not in value:
        return frozenset(), 0.0
    names, _, delay = value.rpartition(":")
    try:
        delay_s = float(delay)
    except ValueError:
        return frozenset(), 0.0
    suffixes = frozenset(n.strip() for n in names.split(",") if n.strip())
    return (suffixes, delay_s) if suffixes and delay_s > 0 else (frozenset(), 0.0)


def is_late(topic: str, settings: Settings, suffixes: frozenset[str]) -> bool:
    """``topic`` is ``topic_name(settings, s)`` (:mod:`squall.policy.topics`) for one of ``suffixes``."""
    return any(topic == topic_name(settings, s) for s in suffixes)
