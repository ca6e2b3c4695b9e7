"""squall's Faust classes: the app (its Kafka transport) and the worker (data directory, membership, logs).

``topology`` declares ``app = SquallApp(..., Worker=SquallWorker)`` and sets
``app.squall_settings``; everything here happens when ``faust -A topology
worker`` starts a worker, never at import.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import socket
import warnings

import faust
import faust.exceptions

import squall.worker.kafka_consumer
from squall.errors import DataDirError, KafkaAccessError, KafkaSetupError
from squall.net.kafka_security import KafkaConnection, check_access, translate
from squall.settings import Settings
from squall.worker.datadir import open_datadir
from squall.worker.log_filters import install_outage_filter
from squall.worker.membership import group_instance_id


class SquallWorker(faust.Worker):
    """faust.Worker that chooses and locks the table directory before anything starts (squall.worker.datadir).

    Not at import: ``faust -A topology --datadir DIR worker`` imports this
    module before Faust's command line exports ``F_DATADIR``. A directory in
    use (or not creatable) stops the worker with one line, before its banner.
    """

    def __init__(self, app: SquallApp, *args, **kwargs) -> None:
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
        check_broker_access(settings)
        # a broker outage logged as a few lines, not one ERROR per attempt (squall.worker.outage_log)
        self.outage_filter = install_outage_filter(
            settings.kafka_outage_log_interval_secs, settings.kafka_outage_quiet_secs
        )
        super().__init__(app, *args, **kwargs)

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


def check_broker_access(settings: Settings, timeout_s: float = 10.0) -> None:
    """Stop the worker with one line if a secured broker refuses its credentials or TLS handshake.

    Without this, aiokafka logs every refused attempt and Faust retries (or
    dies with a traceback). Only a refusal stops the worker: a broker that
    does not answer yet is waited for, as on a PLAINTEXT broker. Runs on its
    own event loop in a thread (the worker's loop is not running yet).
    """
    conn = KafkaConnection.from_settings(settings)
    if conn.protocol == "PLAINTEXT":
        return
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        try:
            pool.submit(asyncio.run, check_access(conn, timeout_s)).result()
        except KafkaAccessError as exc:
            raise SystemExit(f"squall: {exc}") from None
        except KafkaSetupError:
            pass  # not reachable (yet): Faust waits for it


class SquallApp(faust.App):
    """faust.App on :class:`squall.worker.kafka_consumer.Transport` (commits never pass an unacknowledged offset)."""

    squall_settings: Settings  # the loaded configuration, set by topology/ at import, read by SquallWorker

    def _new_transport(self) -> faust.types.TransportT:
        return squall.worker.kafka_consumer.Transport(self.conf.broker_consumer, self)
