"""squall's Faust table class: values by :class:`TableJson`, RocksDB stores written without a write-ahead log.

``topology`` makes every table of the crawl with ``app.Table``, which builds
this class (``SquallApp(..., Table=SquallTable)``).

A RocksDB put goes first to the store's write-ahead log (WAL), a file write
per put, then to the memtable; on this machine that is about 7 µs a put
against 2 µs without it, and a page makes about seven (its URL, host and
audit records, and the changelog offset Faust records after each of their
changelog records is acknowledged). A table's store needs no WAL of its own,
because its changelog topic is its log:

* After a clean stop the memtables reach the store's files when it is
  closed: RocksDB's ``DBOptions::avoid_flush_during_shutdown`` is false by
  default, so closing a store flushes whatever no WAL holds.
* After a SIGKILL the store opens at its last flushed memtable, an earlier
  state of the same sequence of puts, whose changelog offset (Faust's
  ``Store.set_persisted_offset``, written after the put it acknowledges) is
  no later than its data. Faust replays the changelog from that offset, so
  the table ends where the changelog ends, as it does with a WAL. With
  ``frontier.result.inprocess`` (the default) the store is not even opened
  after an unclean stop: ``squall.worker.datadir.drop_unclean_tables``
  removes it and every partition is rebuilt from its changelog.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import faust
import rocksdict
from faust.stores import rocksdb as faust_rocksdb
from faust.types import TP, StoreT

from squall.worker.changelog_producer import Producer as ChangelogProducer
from squall.worker.table_codec import TableJson


class WalFreeOptions(faust_rocksdb.RocksDBOptions):
    """Faust's RocksDB options; each store it opens writes without a WAL (``WriteOptions.disable_wal``)."""

    def open(self, path: Path, *, read_only: bool = False) -> Any:
        db = super().open(path, read_only=read_only)
        if self.use_rocksdict:  # python-rocksdb takes its write options per call: not used by squall
            options = rocksdict.WriteOptions()
            options.disable_wal = True  # type: ignore[method-assign,assignment]  # a property; the stub says a method
            db.set_write_options(options)
        return db


class SquallTable(faust.Table):
    """``faust.Table`` with one :class:`TableJson` for its changelog and its store, WAL-free RocksDB stores, and
    changelog records handed to aiokafka directly (:mod:`squall.worker.changelog_producer`).

    The codec instance is shared by both halves of a table write (the
    changelog record's encoding and the store's), which is what lets it
    encode a value once; Faust hands the table's ``value_serializer`` to the
    store when it builds it (``Collection._new_store_by_url``), lazily, after
    this constructor.
    """

    def __init__(self, app: faust.types.AppT, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.value_serializer = self._codec = TableJson()
        self._changelog_tps: dict[int, TP] = {}  # partition -> the changelog's TP

    def _new_store(self) -> StoreT:
        store = super()._new_store()
        if isinstance(store, faust_rocksdb.Store):  # the memory store of a test app has no options
            store.rocksdb_options = WalFreeOptions(**(store.options or {}), use_rocksdict=store.use_rocksdict)
        return store

    def on_key_set(self, key: Any, value: Any) -> None:
        """Faust's ``Table.on_key_set``: the changelog record queued at the producer's :meth:`changelog` when it has one."""
        producer = self._changelog_producer()
        if producer is None:
            super().on_key_set(key, value)
            return
        partition = self._partition(key)  # before the encoding: it raises outside an agent's event
        self._changelog(producer, partition, key, self._codec.dumps(value))
        self._maybe_set_key_ttl(key, partition)
        self._sensor_on_set(self, key, value)

    def on_key_del(self, key: Any) -> None:
        """Faust's ``Table.on_key_del``: a tombstone (no value), queued the same way."""
        producer = self._changelog_producer()
        if producer is None:
            super().on_key_del(key)
            return
        partition = self._partition(key)
        self._changelog(producer, partition, key, None)
        self._maybe_del_key_ttl(key, partition)
        self._sensor_on_del(self, key)

    def _changelog_producer(self) -> ChangelogProducer | None:
        producer = self.app.producer
        if isinstance(producer, ChangelogProducer) and not self.app.in_transaction and not self.use_partitioner:
            return producer
        return None

    def _partition(self, key: Any) -> int:
        """The partition of the event being processed (Faust's ``partition_for_key``: TypeError outside one)."""
        partition = self.partition_for_key(key)
        assert partition is not None  # not use_partitioner (checked by _changelog_producer)
        return partition

    def _changelog(self, producer: ChangelogProducer, partition: int, key: Any, value: bytes | None) -> None:
        """Queue the changelog record of a write to ``key`` in changelog partition ``partition``."""
        tp = self._changelog_tps.get(partition)
        if tp is None:
            tp = self._changelog_tps[partition] = TP(self.changelog_topic.get_topic_name(), partition)
        if type(key) is bytes:  # squall's tables: Faust's key serializers hand bytes on as they are
            key_bytes = key  # (faust.serializers.registry.Registry.dumps_key skips bytes)
        else:
            key_bytes, _ = self.changelog_topic.prepare_key(key, self.key_serializer)
        producer.changelog(tp, key_bytes, value, self._on_changelog_acknowledged)

    def _on_changelog_acknowledged(self, tp: TP, offset: int) -> None:
        """Faust's ``Collection._on_changelog_sent`` for a round's last record of ``tp``: the store records its offset."""
        self.data.set_persisted_offset(tp, offset)
