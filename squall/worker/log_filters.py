"""Logging plumbing of a worker: the broker-outage filter on aiokafka's loggers.

:func:`install_outage_filter` attaches one :class:`BrokerOutageFilter` to
every aiokafka logger that reports connection failures (a filter on a
logger does not apply to its children, so each is named) and starts a
daemon thread that asks the :class:`squall.worker.outage_log.OutageLog` once a
second for a "still down" or "back" line, logged by ``squall.broker``.
aiokafka runs in Faust's consumer thread too, hence the lock.
"""

from __future__ import annotations

import logging
import threading
import time

from squall.worker.outage_log import OutageLog, is_outage_message

AIOKAFKA_LOGGERS = (
    "aiokafka",
    "aiokafka.conn",
    "aiokafka.client",
    "aiokafka.cluster",
    "aiokafka.consumer.fetcher",
    "aiokafka.consumer.group_coordinator",
    "aiokafka.consumer.consumer",
    "aiokafka.producer.sender",
    "aiokafka.producer.producer",
)
log = logging.getLogger("squall.broker")


class BrokerOutageFilter(logging.Filter):
    """Drops repeated broker-unreachable records; the first one is rewritten to say so."""

    def __init__(self, outage: OutageLog, clock=time.monotonic) -> None:
        super().__init__()
        self.outage = outage
        self.clock = clock
        self.lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if not is_outage_message(record.name, message):
            return True
        with self.lock:
            line = self.outage.on_outage_record(self.clock(), message)
        if line is None:
            return False
        record.msg, record.args = f"squall: {line}", ()
        return True

    def tick(self) -> None:
        with self.lock:
            line = self.outage.on_tick(self.clock())
        if line:
            log.warning("squall: %s", line)


def install_outage_filter(interval_s: float, quiet_s: float) -> BrokerOutageFilter:
    """Attach the filter to aiokafka's loggers and start its once-a-second ticker (daemon thread)."""
    flt = BrokerOutageFilter(OutageLog(interval_s=interval_s, quiet_s=quiet_s))
    known = {n for n in logging.root.manager.loggerDict if n.startswith("aiokafka")}
    for name in sorted(known | set(AIOKAFKA_LOGGERS)):
        logging.getLogger(name).addFilter(flt)

    def run() -> None:
        while True:
            time.sleep(1.0)
            flt.tick()

    threading.Thread(target=run, name="squall-broker-outage-log", daemon=True).start()
    return flt
