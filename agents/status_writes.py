"""What one status-topic event leaves to do (a helper of :mod:`agents.status_updater`, no agent).

:class:`Handled` collects the messages to send on; :class:`Writes` buffers
the event's table writes so each host record is read and written once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from agents.common import save_host, stored_host
from agents.observe import count_refused
from squall.policy.codec import evolve
from squall.policy.frontier import HostRecord
from squall.policy.records import FetchMessage, SignalMessage
from squall.policy.schedule import UrlRecord


@dataclass
class Handled:
    """What :func:`agents.status_apply.handle` leaves to the agent: messages to send on and messages to dead-letter.

    ``reroutes``: (key bytes, partition, message bytes) for URLs owned by
    another partition; ``dead``: (message bytes, the error) to dead-letter;
    ``pending`` (byIP): (host, port, message bytes) of URLs whose host this
    worker has not resolved yet; ``handouts``: fetch messages of the next
    URLs of a host whose result freed a place (:func:`agents.queues.hand_out_next`);
    ``signals``: a result's signal not applied here (its URL was bad, or
    byIP), for the queue regulator.
    """

    reroutes: list[tuple[bytes, int, bytes]] = field(default_factory=list)
    dead: list[tuple[bytes, Exception]] = field(default_factory=list)
    pending: list[tuple[str, int, bytes]] = field(default_factory=list)
    handouts: list[FetchMessage] = field(default_factory=list)
    signals: list[SignalMessage] = field(default_factory=list)
    writes: Writes = field(default_factory=lambda: Writes())


@dataclass
class Writes:
    """One event's table writes, buffered so each host record is read and written once.

    ``hosts``: key → (record as read, record now); ``stores``: URL records to
    write, after the host records (a crash in between re-delivers the
    message, and a URL already stored would no longer count in its host's
    ``url_count``); ``regulated``: keys whose signal was applied in this event;
    ``absent``: keys the hosts table had no record of when read;
    ``redeliverable``: the event's message is one a topic can deliver again
    (False: a result applied in the process that fetched it, whose signal's
    fetch id is then not remembered, :func:`agents.queues.regulate`).

    A host with no record whose only change is refusals (an out-of-scope
    host: never seeded, holding no URL) is not written: its refusals are
    counted in the worker's metrics (:func:`agents.observe.count_refused`).
    """

    hosts: dict[str, tuple[HostRecord, HostRecord]] = field(default_factory=dict)
    stores: list[UrlRecord] = field(default_factory=list)
    regulated: list[str] = field(default_factory=list)
    absent: set[str] = field(default_factory=set)
    redeliverable: bool = True

    def host(self, key: str) -> HostRecord:
        known = self.hosts.get(key)
        if known is not None:
            return known[1]
        host = stored_host(key)
        if host is None:
            host = HostRecord(key=key)
            self.absent.add(key)
        self.hosts[key] = (host, host)
        return host

    def set_host(self, host: HostRecord) -> None:
        self.hosts[host.key] = (self.hosts[host.key][0], host)

    def flush(self, store: Callable[[UrlRecord, float | None], None]) -> None:
        """Write the host records that changed, then the URL records with ``store`` (which keeps the due index).

        ``store(record, handed_out_at_s)`` gets the URL's hand-out time in
        its host's record as written (None: not in flight, or its host is not
        one of this event's).
        """
        for start, host in self.hosts.values():
            if host is start:
                continue
            if host.key in self.absent and evolve(host, rejected=start.rejected) == start:
                count_refused(host.rejected)  # refusals only, of a host with no record: not written
                continue
            save_host(host)
        for record in self.stores:
            known = self.hosts.get(record.key)
            store(record, None if known is None else known[1].in_flight.get(record.url))
        self.hosts, self.stores, self.absent = {}, [], set()
