"""The copies of hand-outs this worker's fetcher got: which one to fetch, which to park, which it finished.

At-least-once delivery (docs/architecture.md invariant 3) can bring a
fetch message twice: re-read after a rebalance, or sent again by an earlier
owner's uncommitted work. The first copy of a hand-out (one fetch id,
:func:`squall.policy.fetch_decision.handout_id`) is fetched; a copy that
arrives while it waits or runs is parked and acknowledged with it; one that
arrives after it finished is acknowledged at once. The finish times also
tell the take-over release (:func:`squall.policy.takeover.stranded`) which
hand-outs this worker got since it owns their partition.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from squall.policy import fetch_decision as fd


class HandoutCopies:
    """Fetch ids waiting or fetching here (with their parked copies) and the last ``keep`` finished ones."""

    def __init__(self, keep: int) -> None:
        """``keep``: how many finished fetch ids are remembered (``fetcher.recent.fetch.ids``)."""
        self.keep = keep
        self.active: dict[str, list[Any]] = {}  # fetch id → Faust events of later copies (acked with it)
        self.recent: OrderedDict[str, float] = OrderedDict()  # fetch id → when it finished here (Unix s)

    def first_copy(self, fid: str, event: Any) -> bool:
        """True for the first copy of a hand-out here; a later copy is parked and acked with the first."""
        if fid in self.recent:
            event.ack()
            return False
        if fid in self.active:
            self.active[fid].append(event)
            return False
        self.active[fid] = []
        return True

    def received(self, url: str, handed_out_at_s: float, since_s: float | None = None) -> bool:
        """Whether this worker got the fetch message of that hand-out (waiting, fetching, or done recently).

        ``since_s`` (Unix s; None: any time): a fetch that finished here
        before it does not count. Its result went out under an earlier
        ownership of the partition: by the time the status topic is read
        through it was applied, or it was lost with that ownership
        (:func:`squall.policy.takeover.stranded`).
        """
        fid = fd.handout_id(url, handed_out_at_s)
        if fid in self.active:
            return True
        done_at_s = self.recent.get(fid)
        return done_at_s is not None and (since_s is None or done_at_s >= since_s)

    def finished(self, fid: str, now_s: float) -> None:
        """The hand-out ``fid`` was fetched and reported at ``now_s`` (Unix s): ack its parked copies."""
        for copy in self.active.pop(fid, []):
            copy.ack()
        self.recent[fid] = now_s
        while len(self.recent) > self.keep:
            self.recent.popitem(last=False)
