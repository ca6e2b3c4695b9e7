"""squall.worker.topic_setup: the topics a worker prepares before it joins, and the assignment check after."""

from __future__ import annotations

import asyncio
import socket
from types import SimpleNamespace

import pytest

from squall.worker import faust_app, kafka_consumer, topic_setup
from squall.worker.topic_setup import late_topics, missing_from_assignment, plan_of, prepare_topics


def test_the_plan_holds_every_topic_and_changelog_of_the_topology_with_one_partition_count():
    import topology

    plan = plan_of(topology.app.squall_topics, faust_app.faust_topics(topology.app))
    tid, n = topology.settings.topology_id, topology.settings.topology_partitions
    from squall.policy.topics import TABLES, all_topics

    assert {k: v for k, v in plan.partitions.items() if "__assignor" not in k} == all_topics(topology.settings)
    assert plan.partitions[f"{tid}-__assignor-__leader"] == 1  # Faust's leader topic, as Faust creates it
    for table in TABLES:
        assert plan.partitions[f"{tid}-{table}-changelog"] == n
        assert plan.configs[f"{tid}-{table}-changelog"] == {"cleanup.policy": "compact"}  # as Faust would
    assert f"{tid}-ticks" not in plan.configs  # plain topics: the broker's defaults


def test_faust_topic_configs_follow_compacting_deleting_and_retention():
    topic = SimpleNamespace(compacting=True, deleting=True, retention=2.5, config={"segment.ms": 1000})
    assert topic_setup.faust_topic_config(topic) == {  # type: ignore[arg-type]
        "cleanup.policy": "compact,delete",
        "retention.ms": "2500",
        "segment.ms": "1000",
    }
    assert topic_setup.faust_topic_config(SimpleNamespace(compacting=None, deleting=None, retention=None, config=None)) == {}  # type: ignore[arg-type]  # noqa: E501


ASSIGNMENT_CASES = [
    # (subscribed, assigned, missing)
    (["s", "t", "c"], [("s", 0), ("t", 0), ("c", 0)], set()),
    (["s", "t", "c"], [("s", 0), ("c", 0), ("s", 2), ("c", 2)], {"t"}),  # t left out by the leader
    (["s", "t", "c"], [], set()),  # more workers than partitions: nothing assigned, nothing missing
    (["s", "t", "c", "leader"], [("leader", 0)], set()),  # only Faust's one-partition leader topic
    (["s", "t", "c", "leader"], [("s", 1), ("t", 1), ("c", 1)], set()),  # the leader topic is not judged
    (["s", "c"], [("s", 1), ("c", 1)], set()),  # t not subscribed (no agent consumes it): not judged
]


@pytest.mark.parametrize(("subscribed", "assigned", "missing"), ASSIGNMENT_CASES)
def test_a_subscribed_topic_without_a_partition_is_missing_only_when_others_are_assigned(subscribed, assigned, missing):
    assert missing_from_assignment(["s", "t", "c"], subscribed, assigned) == missing


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("ticks,signals:8", ({"ticks", "signals"}, 8.0)),
        (" ticks :0.5", ({"ticks"}, 0.5)),
        ("", (set(), 0.0)),
        (None, (set(), 0.0)),
        ("ticks", (set(), 0.0)),
        ("ticks:soon", (set(), 0.0)),
        ("ticks:-1", (set(), 0.0)),
        (":5", (set(), 0.0)),
    ],
)
def test_the_late_topics_hook_is_read_leniently(value, expected):
    suffixes, delay_s = late_topics(value)
    assert (set(suffixes), delay_s) == expected


def test_a_late_topic_is_one_of_the_topology_s_named_topics():
    from tests.unit.settings_helper import settings_of

    settings = settings_of({"topology.id": "crawl7"})
    late = frozenset({"ticks", "signals"})
    assert topic_setup.is_late("crawl7-ticks", settings, late) and topic_setup.is_late("crawl7-signals", settings, late)
    assert not topic_setup.is_late("crawl7-status", settings, late) and not topic_setup.is_late("x-ticks", settings, late)


def test_a_broker_that_does_not_answer_stops_the_worker_in_one_line():
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    plan = plan_of({"x-status": 2}, [])
    with pytest.raises(SystemExit) as exc:
        prepare_topics(f"127.0.0.1:{port}", plan, 1, "x")
    message = str(exc.value.code)
    assert message.startswith("squall: cannot prepare the topics of topology.id 'x'")
    assert f"kafka.bootstrap.servers=127.0.0.1:{port}" in message and "\n" not in message


def test_a_web_port_in_use_stops_the_worker_naming_the_key_and_the_port():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SystemExit) as exc:
            faust_app.check_web_port("127.0.0.1", port)
    message = str(exc.value.code)
    assert message.startswith(f"squall: topology.web.port: port {port} on 127.0.0.1 is in use")
    assert "\n" not in message
    faust_app.check_web_port("127.0.0.1", port)  # free again: no complaint


class _Coordinator:
    def __init__(self) -> None:
        self.generation = 3
        self.rejoins = 0

    def request_rejoin(self) -> None:
        self.rejoins += 1


class _Client:
    def __init__(self, appear_after: int) -> None:
        self.refreshes = 0
        self.appear_after = appear_after
        self.cluster = SimpleNamespace(partitions_for_topic=self._partitions)

    async def force_metadata_update(self) -> bool:
        self.refreshes += 1
        return True

    def _partitions(self, topic: str) -> set[int] | None:
        return {0, 1} if self.refreshes >= self.appear_after else None


def test_a_missing_topic_makes_the_consumer_refresh_its_metadata_until_it_is_there_then_rejoin(monkeypatch):
    client, coordinator = _Client(appear_after=3), _Coordinator()
    thread = SimpleNamespace(
        _consumer=SimpleNamespace(_client=client, _coordinator=coordinator), should_stop=False, REJOIN_RETRY_S=0.0
    )
    asyncio.run(kafka_consumer.ConsumerThread._rejoin_for(thread, {"x-ticks"}, 3))  # type: ignore[arg-type]
    assert (client.refreshes, coordinator.rejoins) == (3, 1)


def test_a_new_generation_ends_the_wait_without_another_rejoin():
    client, coordinator = _Client(appear_after=10**6), _Coordinator()
    coordinator.generation = 4  # the group moved on meanwhile
    thread = SimpleNamespace(
        _consumer=SimpleNamespace(_client=client, _coordinator=coordinator), should_stop=False, REJOIN_RETRY_S=0.0
    )
    asyncio.run(kafka_consumer.ConsumerThread._rejoin_for(thread, {"x-ticks"}, 3))  # type: ignore[arg-type]
    assert coordinator.rejoins == 0


def test_a_partition_count_mismatch_stops_the_worker_with_the_key_named(monkeypatch):
    from squall.errors import ConfigError

    async def mismatch(*args):
        raise ConfigError("topology.partitions", "topic 'x-status' exists with 4 partitions but 2 are configured")

    monkeypatch.setattr(topic_setup, "_ensure", mismatch)
    with pytest.raises(SystemExit) as exc:
        prepare_topics("127.0.0.1:9", plan_of({"x-status": 2}, []), 1, "x")
    assert exc.value.code == (
        "squall: configuration error: topology.partitions: topic 'x-status' exists with 4 partitions but 2 are configured"
    )


def test_a_refused_topic_creation_stops_the_worker_with_the_refusal_line_and_the_connection_is_passed_on(monkeypatch):
    from squall.errors import KafkaAccessError
    from squall.net.kafka_security import Credentials, KafkaConnection

    conn = KafkaConnection("127.0.0.1:9", protocol="SASL_PLAINTEXT", credentials=Credentials("viewer", "secret"))
    seen = []

    async def refused(bootstrap, plan, replication):
        seen.append(bootstrap)
        raise KafkaAccessError(
            "Kafka refused user viewer: not authorized for the topic x-status (TopicAuthorizationFailed)"
        )

    monkeypatch.setattr(topic_setup, "_ensure", refused)
    with pytest.raises(SystemExit) as exc:
        prepare_topics(conn, plan_of({"x-status": 2}, []), 1, "x")
    assert exc.value.code == (
        "squall: Kafka refused user viewer: not authorized for the topic x-status (TopicAuthorizationFailed)"
    )
    assert seen == [conn]  # the worker's TLS/SASL connection, not a bare bootstrap string
    assert "secret" not in repr(conn)


def test_a_worker_checks_its_login_then_creates_its_topics_then_starts_faust(monkeypatch, tmp_path):
    import topology

    order: list[str] = []

    class _Started(Exception):  # stands for Faust's own start (faust.Worker.__init__)
        pass

    def step(name, result=None):
        def record(*args, **kwargs):
            order.append(name)
            return result

        return record

    def faust_starts(*args, **kwargs):
        order.append("faust")
        raise _Started

    monkeypatch.setattr(faust_app, "open_datadir", step("datadir", (tmp_path, None)))
    monkeypatch.setattr(faust_app, "drop_unclean_tables", step("unclean tables", False))
    monkeypatch.setattr(faust_app, "check_web_port", step("web port"))
    monkeypatch.setattr(faust_app, "check_broker_access", step("login"))
    monkeypatch.setattr(faust_app, "prepare_topics", step("topics"))
    monkeypatch.setattr(faust_app, "faust_topics", step("plan", []))
    monkeypatch.setattr(faust_app, "install_outage_filter", step("outage filter"))
    monkeypatch.setattr(faust_app.faust.Worker, "__init__", faust_starts)
    conf = SimpleNamespace(
        datadir=None,
        tabledir=tmp_path / "v1" / "tables",
        consumer_group_instance_id=None,
        web_enabled=True,
        web_bind="",
        web_port=0,
    )
    app = SimpleNamespace(squall_settings=topology.settings, squall_topics={}, conf=conf)
    with pytest.raises(_Started):
        faust_app.SquallWorker(app)  # type: ignore[arg-type]
    assert order == ["datadir", "unclean tables", "web port", "login", "plan", "topics", "outage filter", "faust"]
