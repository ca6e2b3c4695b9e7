"""squall.worker.table_store: every table's RocksDB store writes without a write-ahead log, and keeps its data."""

from __future__ import annotations

import gc
from pathlib import Path

import faust
from faust.stores.rocksdb import RocksDBOptions

import topology
from squall.worker.table_codec import TableJson
from squall.worker.table_store import SquallTable, WalFreeOptions


def _wal_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.glob("*.log"))


def _fill(options: RocksDBOptions, path: Path):
    db = options.open(path)
    for i in range(200):
        db.put(b"k%d" % i, b"v" * 100)
    return db


def test_a_store_opened_by_the_table_options_writes_no_wal_and_an_ordinary_one_does(tmp_path: Path) -> None:
    plain = _fill(RocksDBOptions(use_rocksdict=True), tmp_path / "plain")
    walfree = _fill(WalFreeOptions(use_rocksdict=True), tmp_path / "walfree")
    assert _wal_bytes(tmp_path / "plain") > 0
    assert _wal_bytes(tmp_path / "walfree") == 0
    plain.close()
    walfree.close()


def test_what_a_walfree_store_holds_is_there_again_after_it_is_dropped_as_faust_drops_it(tmp_path: Path) -> None:
    db = _fill(WalFreeOptions(use_rocksdict=True), tmp_path / "db")
    del db  # Faust's Store.stop and revoke_partitions forget the handle; RocksDB flushes the memtable on close
    gc.collect()
    again = RocksDBOptions(use_rocksdict=True).open(tmp_path / "db")
    assert again.get(b"k199") == b"v" * 100
    assert again.get(b"k0") == b"v" * 100
    again.close()


def test_every_table_of_the_topology_is_a_squall_table_with_its_own_codec() -> None:
    tables = (topology.urls_table, topology.hosts_table, topology.robots_table, topology.audit_table)
    for table in tables:
        assert isinstance(table, SquallTable)
        assert isinstance(table.value_serializer, TableJson)
    assert len({id(t.value_serializer) for t in tables}) == len(tables)  # one memo per table


def test_the_store_a_squall_table_builds_opens_its_partitions_without_a_wal(tmp_path: Path) -> None:
    app = faust.App("table-store-test", store="rocksdb://", datadir=str(tmp_path), Table=SquallTable)
    table = app.Table("t", key_type=bytes, options={"write_buffer_size": 1 << 20})
    store = table.data
    assert isinstance(store.rocksdb_options, WalFreeOptions)
    assert store.rocksdb_options.write_buffer_size == 1 << 20  # the table's options kept
    db = store._db_for_partition(0)
    db.put(b"k", b"v")
    assert _wal_bytes(store.partition_path(0)) == 0


class _Queue:
    def __init__(self) -> None:
        self.records: list[tuple[object, bytes, bytes | None]] = []

    def changelog(self, tp, key, value, on_acknowledged) -> None:  # ChangelogProducer.changelog's signature
        self.records.append((tp, key, value))


def test_a_changelog_record_carries_the_key_bytes_fausts_key_serializer_gives() -> None:
    queue = _Queue()
    for table in (topology.urls_table, topology.hosts_table, topology.audit_table):
        for key in (b"https://a.example/p?q=1", b"a.example", "\u00e9".encode()):
            table._changelog(queue, 0, key, b"{}")
            faust_key, _ = table.changelog_topic.prepare_key(key, table.key_serializer)
            assert queue.records[-1][1] == faust_key == key
            assert queue.records[-1][0].topic == table.changelog_topic.get_topic_name()
