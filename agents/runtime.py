"""Per-worker, in-memory state shared by the agents: caches of the tables, never the truth.

The due indexes are rebuilt from the urls and hosts tables after every
rebalance (restart included); losing them loses nothing.
"""

from __future__ import annotations

import logging
import time

from squall.policy.frontier import DueIndex, HostRecord
from squall.policy.partition import partition_for_key
from squall.policy.schedule import UrlRecord
from topology import app, hosts_table, settings, ticks_topic, urls_table

log = logging.getLogger("squall.runtime")
PARTITIONS: int = settings.topology_partitions
INFLIGHT_TIMEOUT_S: float = settings.frontier_inflight_timeout_secs
AHEAD: int = settings.frontier_handout_ahead
LEAD_S: float = settings.frontier_handout_lead_secs


class WorkerState:
    """Due index per owned partition, when a tick was last sent to each, and since when it is owned.

    ``assigned_at`` (partition → Unix s) tells a hand-out of this worker
    from one of an earlier owner (the take-over rule of :mod:`squall.policy.pace`).
    """

    def __init__(self) -> None:
        self.indexes: dict[int, DueIndex] = {}
        self.tick_sent_at: dict[int, float] = {}
        self.assigned_at: dict[int, float] = {}

    def index_for_key(self, key: str) -> DueIndex | None:
        return self.indexes.get(partition_for_key(key, PARTITIONS))

    def rebuild(self, partitions: set[int]) -> None:
        """Rebuild the due indexes of ``partitions`` from the tables (after recovery)."""
        now = time.time()
        self.assigned_at = {p: self.assigned_at.get(p, now) for p in partitions}
        self.indexes = {p: DueIndex() for p in partitions}
        self.tick_sent_at = {}
        in_flight: set[str] = set()
        for value in hosts_table.values():
            host = HostRecord.from_dict(value)
            index = self.index_for_key(host.key)
            if index is not None:
                index.set_host_ready(host.key, host.eligible_at_s(INFLIGHT_TIMEOUT_S, now, AHEAD, LEAD_S))
                in_flight.update(host.live_in_flight(INFLIGHT_TIMEOUT_S, now))
        count = 0
        for value in urls_table.values():
            rec = UrlRecord.from_dict(value)
            index = self.index_for_key(rec.key)
            if index is not None and rec.next_fetch_at_s is not None and rec.url not in in_flight:
                index.push(rec.key, rec.url, rec.next_fetch_at_s, rec.priority)
                count += 1
        log.info("squall: due index rebuilt for partitions %s: %d URLs scheduled, %d in flight",
                 sorted(partitions), count, len(in_flight))


state = WorkerState()


@app.on_rebalance_complete.connect
async def _rebuild_after_recovery(sender, **kwargs) -> None:  # noqa: ANN001 (Faust signal)
    actives = app.assignor.assigned_actives()
    partitions = {tp.partition for tp in actives if tp.topic == ticks_topic.get_topic_name()}
    state.rebuild(partitions)
