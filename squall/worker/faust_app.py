"""squall's Faust classes: the app (its Kafka transport) and the worker (data directory, membership, logs).

``topology`` declares ``app = SquallApp(..., Worker=SquallWorker)`` and sets
``app.squall_settings``; everything here happens when ``faust -A topology
worker`` starts a worker, never at import.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import importlib
import logging
import socket
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import faust
import faust.exceptions
from faust.types import Message
from mode.utils.objects import cached_property
from mode.utils.queues import FlowControlEvent

import squall.worker.kafka_consumer
from squall.errors import DataDirError, KafkaAccessError, KafkaSetupError
from squall.net.kafka_security import KafkaConnection, check_access, translate
from squall.settings import Settings
from squall.worker.datadir import drop_unclean_tables, mark_clean, open_datadir
from squall.worker.flow_control import FlowControl
from squall.worker.log_filters import install_outage_filter
from squall.worker.membership import group_instance_id
from squall.worker.topic_setup import plan_of, prepare_topics
from squall.worker.versions import check_hooked_versions

log = logging.getLogger("squall.worker")


class SquallWorker(faust.Worker):
    """faust.Worker that prepares what the worker needs before anything starts, each failure one line.

    In order, before the banner: faust-streaming and aiokafka must be the
    versions pyproject.toml pins (:mod:`squall.worker.versions`: squall's
    hooks into their internals were written for them); the table directory is chosen and locked
    (:mod:`squall.worker.datadir`; not at import: ``faust -A topology --datadir
    DIR worker`` imports this module before Faust's command line exports
    ``F_DATADIR``) — a directory in use or not creatable stops the worker; the
    web port (``topology.web.port`` or ``--web-port``) must be free; a secured
    broker must accept the worker's credentials and TLS handshake
    (:func:`check_broker_access`); every topic of the topology is created and
    listed in the broker's metadata before the consumer joins the group
    (:mod:`squall.worker.topic_setup`), through the same
    :class:`~squall.net.kafka_security.KafkaConnection` as Faust's clients.
    Then Faust starts (:meth:`start`: an operation the broker refuses ends it
    with one line too).
    """

    def __init__(self, app: SquallApp, *args, **kwargs) -> None:
        check_hooked_versions()  # another faust-streaming or aiokafka: one line naming both versions
        settings = app.squall_settings
        try:
            path, self.datadir_lock = open_datadir(settings.topology_data_dir)
        except DataDirError as exc:
            raise SystemExit(f"squall: {exc}") from None
        with warnings.catch_warnings():  # Faust warns that the keys were read (at import) before
            warnings.simplefilter("ignore", faust.exceptions.AlreadyConfiguredWarning)
            app.conf.datadir = path
            # static membership (KIP-345): a stable id per worker, unique thanks to the locked datadir
            app.conf.consumer_group_instance_id = group_instance_id(  # type: ignore[assignment]  # None: dynamic
                settings.kafka_group_instance_id, socket.gethostname(), path
            )
        self.squall_datadir = path
        if settings.frontier_result_inprocess:  # results applied in process heal only from the changelogs
            try:
                dropped = drop_unclean_tables(path, Path(app.conf.tabledir))
            except DataDirError as exc:
                raise SystemExit(f"squall: {exc}") from None
            if dropped:
                log.warning(
                    "squall: the last worker on %s did not stop cleanly: its tables are rebuilt from their "
                    "changelogs (frontier.result.inprocess)",
                    path,
                )
        if app.conf.web_enabled:
            check_web_port(app.conf.web_bind, app.conf.web_port)
        conn = KafkaConnection.from_settings(settings)
        check_broker_access(conn)  # a refused login or TLS handshake: one line, before any client retries it
        prepare_topics(
            conn,
            plan_of(app.squall_topics, faust_topics(app)),
            settings.topology_replication_factor,
            settings.topology_id,
        )
        # a broker outage logged as a few lines, not one ERROR per attempt (squall.worker.outage_log)
        self.outage_filter = install_outage_filter(
            settings.kafka_outage_log_interval_secs, settings.kafka_outage_quiet_secs
        )
        super().__init__(app, *args, **kwargs)

    async def stop(self) -> None:
        """Faust's stop (the producer flushed, the tables closed); then the datadir's clean mark.

        No mark when it crashed or left table changelog records unsent: the
        next start rebuilds the tables from the changelogs (``drop_unclean_tables``).
        """
        await super().stop()
        unsent = getattr(self.app.producer, "changelog_pending", 0)  # squall.worker.changelog_producer.Producer
        if unsent:
            log.warning("squall: %d table changelog record(s) not sent: no clean mark, the next start rebuilds", unsent)
        if self.crash_reason is None and not unsent:
            mark_clean(self.squall_datadir)

    async def start(self) -> None:
        """Faust's start; an operation the broker refuses while starting (an ACL) ends it with one line.

        E.g. a worker started with the viewer's credentials: Faust's topic
        creation is refused, and instead of its traceback the worker says so
        (:func:`squall.net.kafka_security.translate`) and exits.
        """
        try:
            await super().start()
        except Exception as exc:
            refused = translate(exc, KafkaConnection.from_settings(self.app.squall_settings))  # type: ignore[attr-defined]
            if refused is None:
                raise
            raise SystemExit(f"squall: {refused}") from None


def check_broker_access(conn: KafkaConnection, timeout_s: float = 10.0) -> None:
    """Stop the worker with one line if a secured broker refuses its credentials or TLS handshake.

    Without this, aiokafka logs every refused attempt and Faust retries (or
    dies with a traceback). Only a refusal stops the worker here: a broker
    that does not answer is left to the topic setup that follows
    (:func:`squall.worker.topic_setup.prepare_topics`), which says so in one
    line, as on a PLAINTEXT broker. Runs on its own event loop in a thread
    (the worker's loop is not running yet).
    """
    if conn.protocol == "PLAINTEXT":
        return
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        try:
            pool.submit(asyncio.run, check_access(conn, timeout_s)).result()
        except KafkaAccessError as exc:
            raise SystemExit(f"squall: {exc}") from None
        except KafkaSetupError:
            pass  # not reachable: prepare_topics says so


class SquallApp(faust.App):
    """faust.App on :class:`squall.worker.kafka_consumer.Transport` (commits never pass an unacknowledged offset)."""

    squall_settings: Settings  # the loaded configuration, set by topology/ at import, read by SquallWorker
    squall_topics: Mapping[str, int] = {}  # topic name → partitions (not the changelogs), set by topology/
    squall_fetch_runtime: Any = None  # the worker's FetcherRuntime, created when its fetcher starts (agents.common)
    squall_agent_config: Any = None  # the agents' configuration objects, built on first use (agents.common)
    squall_addresses: Any = None  # the byIP resolutions, created on first use (agents.common.addresses)
    squall_tables: Any = None  # the tables the agents use, the topology's unless a test hands in others
    squall_worker_state: Any = None  # the due indexes and assignment times, created on first use (agents.worker_state)
    squall_observed: Any = None  # the metrics, page rate and audit buffer, created on first use (agents.observe)
    squall_stuck_watch: Any = None  # the stuck-partition watch, created on first use (agents.upkeep)
    squall_browser: Any = None  # the Chromium found at start and its pool, when render.enabled (agents.render)
    squall_agent_modules: Sequence[str] = ()  # the modules declaring the agents, set by topology/

    def worker_init(self) -> None:
        """Import the agent modules (they register on this app) when ``faust -A topology worker`` starts.

        Importing them from ``topology`` itself would make every agent
        module's import depend on the order (an agent imports ``topology``);
        here they are imported after it, in the listed order, and an import
        error stops the worker (Faust's autodiscovery would only log it).
        """
        super().worker_init()
        for name in self.squall_agent_modules:
            importlib.import_module(name)

    def _new_transport(self) -> faust.types.TransportT:
        return squall.worker.kafka_consumer.Transport(self.conf.broker_consumer, self)

    @cached_property
    def flow_control(self) -> FlowControlEvent:
        """Faust's flow control of the stream queues; what a clear drops while the flow runs is read again (fix 9)."""
        return FlowControl(loop=self.loop, dropped=self._read_dropped_again, acks_enabled_for=self._acks_enabled_for)

    def _acks_enabled_for(self, topic: str) -> bool:
        return bool(self.topics.acks_enabled_for(topic))

    def _read_dropped_again(self, messages: list[Message]) -> None:
        """Seek the partitions of ``messages`` (dropped from the agents' queues) back to the lowest of each."""
        consumer = self._consumer  # None until the worker started its consumer
        if isinstance(consumer, squall.worker.kafka_consumer.Consumer):
            for message in messages:
                consumer.read_again(message.tp, message.offset, "the flow's resume dropped it from an agent's queue")


def faust_topics(app: faust.App) -> list[faust.types.TopicT]:
    """The topics Faust creates by itself: each table's changelog and (unless disabled) the leader topic."""
    topics = [table.changelog_topic for table in app.tables.values()]
    if not app.conf.topic_disable_leader:
        topics.append(app._leader_assignor._leader_topic)  # type: ignore[attr-defined]  # faust-streaming 0.15
    return topics


def check_web_port(host: str, port: int) -> None:
    """Stop with one line when ``host:port`` (the worker's web server) is taken.

    Faust binds it only after the tables are recovered, and a port in use
    then ends the worker in a long OSError traceback.

    Raises:
        SystemExit: the port is in use (or cannot be bound), naming ``topology.web.port``.
    """
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp binds: TIME_WAIT is no conflict
        try:
            probe.bind((host, port))
        except OSError as exc:
            why = (
                "is in use (another worker on this machine?)"
                if exc.errno == errno.EADDRINUSE
                else f"cannot be bound ({exc.strerror})"
            )
            raise SystemExit(
                f"squall: topology.web.port: port {port} on {host} {why}; give each worker its own "
                "topology.web.port (or --web-port N), or start it with --without-web"
            ) from None
