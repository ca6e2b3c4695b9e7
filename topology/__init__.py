"""The Faust application of squall: settings, topics and tables, declared in one place.

``faust -A topology worker -l info`` starts a worker. Everything here is
declaration; decisions live in :mod:`squall` (policy) and the loops in
:mod:`agents`.

Topics (all raw bytes, keyed by the URL's partition key as UTF-8 — see
:mod:`squall.policy.partition` — with ``topology.partitions`` partitions and Kafka's
default murmur2 partitioner, so partition p of every topic and table lands on
the same worker: docs/architecture.md invariant 1):

* ``<id>-status``   StatusMessage JSON: seeds, outlinks, fetch results.
* ``<id>-fetch``    FetchMessage JSON: URLs handed out by the spout.
* ``<id>-signals``  SignalMessage JSON: one per handed-out URL, for the queue regulator.
* ``<id>-ticks``    ``{"partition": p, "sent_at_s": t}`` sent to one partition when that
  partition's spout has a due host (the hand-out then runs inside that
  partition's event, which Faust table writes need).
* ``<id>-deadletter`` messages that could not be decoded, with the reason.
* ``<id>-documents`` Document JSON (:class:`squall.policy.documents.Document`): one per
  FETCHED HTML page when ``documents.enabled``; read by ``squall index``, never by an agent.
* ``<id>-control``  operator commands (:mod:`squall.policy.control`): keyed by the
  host's partition key, a crawl-wide one sent to every partition.

The parse step is an in-process hand-off inside the fetcher (no parse
topic): a page body never travels through Kafka (pages can exceed the
broker's message size), and the fetch event is acknowledged only after the
parse results are sent and the status is sent or applied, so at-least-once
delivery still covers fetch + parse as one step.

Tables (RocksDB via rocksdict, recovered from compacted changelogs):

* ``urls``    canonical URL → UrlRecord (status, depth, attempts, next fetch time, ...)
* ``hosts``   partition key → HostRecord (next eligible time, blocked-until,
  in-flight hand-outs, regulator state, rejection counts)
* ``robots``  robots.txt origin → RobotsEntry (RFC 9309 cache, survives restarts)
* ``audit``   partition key → HostAudit (the politeness audit, :mod:`squall.policy.audit`)
* ``control`` ``crawl:<partition>`` → CrawlControl (pause, default delay, crawl-wide
  operator log; :mod:`squall.policy.control`)

Each worker also serves ``/metrics`` (Prometheus) on its web server
(:mod:`agents.metrics_page`).
"""

from __future__ import annotations

import faust
from faust.types import TableT

from squall.errors import ConfigError
from squall.net.kafka_security import KafkaConnection
from squall.policy.lease import heartbeat_interval_s
from squall.policy.topics import topic_name
from squall.settings import load_settings
from squall.worker.faust_app import SquallApp, SquallWorker
from squall.worker.table_store import SquallTable

try:
    settings = load_settings()
    _CREDENTIALS = KafkaConnection.from_settings(settings).faust_credentials()  # TLS/SASL: squall.net.kafka_security
except ConfigError as exc:  # a clear one-line message instead of a traceback from `faust -A topology`
    raise SystemExit(f"squall: configuration error: {exc}") from None

_ID = settings.topology_id
_N = settings.topology_partitions


app = SquallApp(
    _ID,
    broker="kafka://" + settings.kafka_bootstrap_servers,
    broker_credentials=_CREDENTIALS,
    store="rocksdb://",
    Table=SquallTable,  # one TableJson per table, RocksDB stores without a write-ahead log
    # the table directory is resolved and locked when the worker starts: SquallWorker
    Worker=SquallWorker,
    topic_partitions=_N,
    topic_replication_factor=settings.topology_replication_factor,
    topic_allow_declare=True,
    table_standby_replicas=0,
    broker_session_timeout=settings.kafka_session_timeout_secs,
    # batch the many small messages of a crawl (statuses, signals, hand-outs, changelogs) into fewer
    # produce requests; the delay is hidden inside the hand-out lead (frontier.handout.lead.secs)
    producer_linger=settings.kafka_producer_linger_secs,
    broker_heartbeat_interval=heartbeat_interval_s(settings.kafka_session_timeout_secs),
    consumer_auto_offset_reset="earliest",
    # `faust worker` starts Faust's web server unless given --without-web; never on all interfaces
    web_port=settings.topology_web_port,
    web_bind="127.0.0.1",
    origin="topology",
    stream_wait_empty=True,
)
app.squall_settings = settings  # read by SquallWorker when the worker starts


def _topic(suffix: str) -> faust.TopicT:
    return app.topic(
        topic_name(settings, suffix),  # the one naming scheme, shared with the command line
        key_type=bytes,
        value_type=bytes,
        key_serializer="raw",
        value_serializer="raw",
        partitions=_N,
        internal=True,
    )


status_topic = _topic("status")
fetch_topic = _topic("fetch")
signals_topic = _topic("signals")
ticks_topic = _topic("ticks")
deadletter_topic = _topic("deadletter")
documents_topic = _topic("documents")
control_topic = _topic("control")


def _table(name: str, help_text: str) -> TableT:
    schema: faust.Schema = faust.Schema(key_type=bytes, value_type=None, key_serializer="raw", value_serializer="json")
    # key_type=bytes too: Faust derives the store's key serializer from key_type, not from the schema
    # RocksDB memory per store bounded (config topology.rocksdb.*): Faust's defaults grow with the table
    rocksdb = {
        "write_buffer_size": settings.topology_rocksdb_write_buffer_bytes,
        "max_write_buffer_number": 2,
        "block_cache_size": settings.topology_rocksdb_block_cache_bytes,
    }
    return app.Table(name, schema=schema, key_type=bytes, partitions=_N, help=help_text, options=rocksdb)


urls_table = _table("urls", "canonical URL -> UrlRecord")
hosts_table = _table("hosts", "partition key -> HostRecord")
robots_table = _table("robots", "robots.txt origin -> RobotsEntry")
audit_table = _table("audit", "partition key -> HostAudit (politeness audit)")
control_table = _table("control", "crawl:<partition> -> CrawlControl (operator commands)")

TOPIC_NAMES = {
    t.get_topic_name(): _N
    for t in (status_topic, fetch_topic, signals_topic, ticks_topic, deadletter_topic, documents_topic, control_topic)
}
app.squall_topics = TOPIC_NAMES  # created with the changelogs before a worker joins (squall.worker.topic_setup)

__all__ = [
    "AGENT_MODULES",
    "TOPIC_NAMES",
    "app",
    "audit_table",
    "control_table",
    "control_topic",
    "deadletter_topic",
    "documents_topic",
    "fetch_topic",
    "hosts_table",
    "robots_table",
    "settings",
    "signals_topic",
    "status_topic",
    "ticks_topic",
    "urls_table",
]

# The agents register themselves on this app when the worker starts (SquallApp.worker_init imports
# them): importing them here would make every agent module's import depend on the import order.
AGENT_MODULES = (
    "agents.upkeep",
    "agents.fetcher",
    "agents.metrics_page",
    "agents.progress",
    "agents.regulator",
    "agents.spout",
    "agents.status_updater",
    "agents.control",
)
app.squall_agent_modules = AGENT_MODULES
