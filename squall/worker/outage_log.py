"""A broker outage as a few log lines: down, still down every N seconds, back.

aiokafka logs one ERROR per connection attempt, metadata refresh, fetch and
coordinator lookup while the broker is unreachable (about 2 000 lines in 19 s
per worker), and one per offset lookup while a restarted broker has not
elected its partition leaders yet. :class:`OutageLog` decides, from the time and the message of
each such record, which ones an operator sees: the first (it says what
failed), a summary every ``interval_s`` while the broker stays unreachable,
and one line once no such record came for ``quiet_s`` (the client reconnected:
aiokafka retries every ~0.1 s while it cannot). Pure: the clock is passed in
(seconds, any monotonic origin). Keys: ``kafka.outage.log.interval.secs``,
``kafka.outage.quiet.secs``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: aiokafka messages that mean "the broker cannot be reached" (client, fetcher, coordinator, producer).
OUTAGE_PATTERNS = re.compile(
    r"Unable connect to|Unable to update metadata|Unable to request metadata|Failed fetch messages"
    r"|Group Coordinator Request failed|Got error produce response|NodeNotReadyError|KafkaConnectionError"
    r"|Connection (?:at .* )?(?:closed|lost|refused)|Marking the coordinator dead"
    r"|Heartbeat session expired|Coordinator .* is not available|Metadata update failed"
    # a restarted broker that has not elected its partition leaders yet (seen for ~1 s after a kill -9)
    r"|Failed fetch offsets from .*NotLeaderForPartitionError"
)


def is_outage_message(logger_name: str, message: str) -> bool:
    """True for an aiokafka record that says the broker is unreachable."""
    return logger_name.startswith("aiokafka") and OUTAGE_PATTERNS.search(message) is not None


@dataclass
class OutageLog:
    """State of one worker's view of the broker: up, or down since ``down_since_s``."""

    interval_s: float
    quiet_s: float
    down_since_s: float | None = None
    last_error_s: float = 0.0
    last_summary_s: float = 0.0
    suppressed: int = 0
    last_message: str = ""

    def on_outage_record(self, now_s: float, message: str) -> str | None:
        """A broker-unreachable record: the line to log instead of it, or ``None`` to drop it."""
        self.last_error_s = now_s
        self.last_message = message
        if self.down_since_s is None:
            self.down_since_s = self.last_summary_s = now_s
            self.suppressed = 0
            return f"broker unreachable: {message} (repeats are summarised every {self.interval_s:g} s)"
        self.suppressed += 1
        return None

    def on_tick(self, now_s: float) -> str | None:
        """Called about every second: a "still down" or "back" line when one is due, else ``None``."""
        if self.down_since_s is None:
            return None
        down_for = now_s - self.down_since_s
        if now_s - self.last_error_s >= self.quiet_s:
            line = (
                f"broker reachable again after {self.last_error_s - self.down_since_s:.1f} s "
                f"({self.suppressed} client errors suppressed)"
            )
            self.down_since_s = None
            return line
        if now_s - self.last_summary_s >= self.interval_s:
            self.last_summary_s = now_s
            return (
                f"broker still unreachable after {down_for:.0f} s ({self.suppressed} client errors "
                f"suppressed; last: {self.last_message})"
            )
        return None
