"""Operator commands: the control topic's message, its validation, and what it does to a queue.

Pure: no clock, no I/O. The operations are URLFrontier's (crawler-commons
url-frontier, gRPC API 2.x: ``SetDelay``, ``BlockQueueUntil``,
``SetCrawlLimit``, ``SetActive``) as messages on the ``<id>-control`` topic,
keyed like every other topic by the host's partition key
(:mod:`squall.policy.partition`), so a host's command reaches the worker that
owns the host; a crawl-wide command is sent to every partition.

The message (UTF-8 JSON object, version 1)::

    {"v": 1, "op": "host.block", "host": "example.org",
     "args": {"until_s": 1764662400.0, "reason": "complaint 4711"},
     "by": "alice@ops-box", "at": 1764655200.0}

* ``v`` — format version, 1.
* ``op`` — one of :class:`Op`'s values.
* ``host`` — the host name (or address) the command is about; absent for ``crawl.*``.
* ``args`` — the operation's arguments (object, may be absent when it has none):
  ``host.delay`` / ``crawl.delay``: ``delay_s`` (seconds ≥ 0, or null to go back to
  ``fetcher.server.delay``); ``host.block``: ``until_s`` (Unix seconds) and an optional
  ``reason`` (text); ``host.limit``: ``pages`` (integer ≥ 0, or null for no limit).
* ``by`` — who sent it (text: a name, or ``user@machine``).
* ``at`` — when it was sent (Unix seconds).

A message that is not this shape is bad input (:class:`squall.errors.MessageError`,
which the control agent sends to the dead-letter topic with the reason).

Where the state lives (all durable, changelogged): a host's operator delay,
block and page limit, and its operator log, are fields of its
:class:`squall.policy.frontier.HostRecord` (the hosts table), so they follow the
host to its next owner; the crawl-wide default delay and the pause are a
:class:`CrawlControl` per partition (the control table, key :func:`crawl_key`).
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypeGuard

from squall.errors import MessageError
from squall.policy.codec import loads
from squall.policy.frontier import HostRecord
from squall.policy.pace import PaceConfig, PaceState
from squall.policy.partition import partition_for_key

VERSION = 1
LOG_KEPT = 20  #: applied commands kept per host (and per partition for crawl-wide ones): the operator log
CRAWL_KEY = "~crawl"  #: message key of a crawl-wide command (sent to every partition explicitly)
TEXT_MAX = 500  #: longest ``by`` / ``reason`` kept (characters)


class Op(StrEnum):
    """The operations (URLFrontier 2.x names in the comments)."""

    HOST_DELAY = "host.delay"  # SetDelay on one queue
    HOST_BLOCK = "host.block"  # BlockQueueUntil
    HOST_UNBLOCK = "host.unblock"  # BlockQueueUntil(0)
    HOST_LIMIT = "host.limit"  # SetCrawlLimit
    HOST_DELETE = "host.delete"  # DeleteQueue
    CRAWL_DELAY = "crawl.delay"  # SetDelay on the default queue
    CRAWL_PAUSE = "crawl.pause"  # SetActive(false)
    CRAWL_RESUME = "crawl.resume"  # SetActive(true)

    @property
    def crawl_wide(self) -> bool:
        """True for the ``crawl.*`` operations (no host; sent to every partition)."""
        return self.value.startswith("crawl.")


@dataclass(frozen=True)
class Command:
    """One operator command (see the module docstring for the wire format). Times: Unix seconds.

    ``delay_s`` (s, None = back to the configured default), ``until_s``,
    ``reason``, ``pages`` (None = no limit) are the operation's arguments;
    the others are None.
    """

    op: Op
    by: str
    at_s: float
    host: str | None = None
    delay_s: float | None = None
    until_s: float | None = None
    reason: str | None = None
    pages: int | None = None

    def args(self) -> dict[str, Any]:
        """The ``args`` object of this command."""
        if self.op in (Op.HOST_DELAY, Op.CRAWL_DELAY):
            return {"delay_s": self.delay_s}
        if self.op is Op.HOST_BLOCK:
            return {"until_s": self.until_s, **({"reason": self.reason} if self.reason else {})}
        if self.op is Op.HOST_LIMIT:
            return {"pages": self.pages}
        return {}

    def to_dict(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"v": VERSION, "op": self.op.value}
        if self.host is not None:
            obj["host"] = self.host
        args = self.args()
        if args:
            obj["args"] = args
        obj["by"] = self.by
        obj["at"] = self.at_s
        return obj

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_dict(), separators=(",", ":")).encode()

    def log_entry(self) -> dict[str, Any]:
        """What the operator log keeps of this command: ``at``, ``op``, ``by`` and ``args``."""
        return {"at": self.at_s, "op": self.op.value, "by": self.by, "args": self.args()}

    @classmethod
    def from_bytes(cls, raw: bytes | None) -> Command:
        """Decode and validate one control-topic message.

        Raises:
            MessageError: not JSON, not an object, an unknown version or
                ``op``, a malformed host name, a missing or out-of-range
                argument, ``by`` or ``at`` missing or of the wrong type.
        """
        try:
            obj = loads(raw or b"")
        except (ValueError, TypeError, RecursionError) as exc:
            raise MessageError(f"command is not JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise MessageError("a command must be a JSON object")
        if obj.get("v") != VERSION:
            raise MessageError(f"command version must be {VERSION}, got {obj.get('v')!r}")
        try:
            op = Op(obj["op"] if isinstance(obj.get("op"), str) else "")
        except ValueError:
            raise MessageError(f"unknown op {obj.get('op')!r} (one of {', '.join(o.value for o in Op)})") from None
        by, at = obj.get("by"), obj.get("at")
        if not isinstance(by, str) or not by.strip():
            raise MessageError("command needs a non-empty string 'by'")
        if not _number(at):
            raise MessageError(f"command needs 'at', Unix seconds, got {at!r}")
        args = obj.get("args", {})
        if not isinstance(args, dict):
            raise MessageError("'args' must be an object")
        host = None
        if not op.crawl_wide:
            host = check_host(obj.get("host"))
        elif obj.get("host") is not None:
            raise MessageError(f"{op.value} takes no host")
        kwargs: dict[str, Any] = {}
        if op in (Op.HOST_DELAY, Op.CRAWL_DELAY):
            delay = args.get("delay_s")
            if delay is not None and not (_number(delay) and delay >= 0):
                raise MessageError(f"{op.value}: 'delay_s' must be seconds >= 0 or null, got {delay!r}")
            kwargs["delay_s"] = None if delay is None else float(delay)
        elif op is Op.HOST_BLOCK:
            until, reason = args.get("until_s"), args.get("reason")
            if not _number(until):
                raise MessageError(f"host.block: 'until_s' must be Unix seconds, got {until!r}")
            if reason is not None and not isinstance(reason, str):
                raise MessageError(f"host.block: 'reason' must be text, got {reason!r}")
            kwargs.update(until_s=float(until), reason=reason[:TEXT_MAX] if reason else None)
        elif op is Op.HOST_LIMIT:
            pages = args.get("pages")
            if pages is not None and not (isinstance(pages, int) and not isinstance(pages, bool) and pages >= 0):
                raise MessageError(f"host.limit: 'pages' must be an integer >= 0 or null, got {pages!r}")
            kwargs["pages"] = pages
        return cls(op=op, by=by.strip()[:TEXT_MAX], at_s=float(at), host=host, **kwargs)


def _number(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")


def check_host(value: object) -> str:
    """A host name or IP address as partition keys spell it: lower case, no port, no brackets, IDNA-encoded.

    Raises:
        MessageError: not a string, empty, longer than 253 characters, or
            not a DNS name (RFC 1123 §2.1 labels) nor an IP address.
    """
    if not isinstance(value, str) or not value.strip():
        raise MessageError("command needs a non-empty string 'host'")
    host = value.strip().rstrip(".").lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        ascii_host = host.encode("idna").decode("ascii")
    except UnicodeError:
        raise MessageError(f"not a host name: {value!r}") from None
    labels = ascii_host.split(".")
    if len(ascii_host) > 253 or not all(_LABEL.match(label) for label in labels):
        raise MessageError(f"not a host name: {value!r}")
    return ascii_host


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNITS_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_duration(text: str) -> float:
    """Seconds in ``text``: a number with an optional unit ``ms``, ``s``, ``m``, ``h``, ``d`` (``90``, ``20s``, ``2h``).

    Raises:
        MessageError: not a non-negative number with one of those units.
    """
    match = _DURATION.match(text)
    if match is None:
        raise MessageError(f"not a duration: {text!r} (a number with s, m, h or d, e.g. 20s, 2h)")
    return float(match.group(1)) * _UNITS_S[match.group(2)]


def parse_time(text: str) -> float:
    """Unix seconds of ``text``: ISO 8601 (``2026-12-02T10:00``, UTC when no offset is given) or Unix seconds.

    Raises:
        MessageError: neither.
    """
    try:
        value = float(text)
    except ValueError:
        pass
    else:
        if math.isfinite(value) and value >= 0:
            return value
        raise MessageError(f"not a time: {text!r}")
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise MessageError(f"not a time: {text!r} (ISO 8601, e.g. 2026-12-02T10:00Z, or Unix seconds)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _logged(log: list[dict[str, Any]], cmd: Command) -> list[dict[str, Any]]:
    """``log`` with ``cmd`` appended (a re-delivered copy is not appended twice), the last :data:`LOG_KEPT` kept."""
    entry = cmd.log_entry()
    if entry in log:
        return log
    return [*log, entry][-LOG_KEPT:]


def deleted(host: HostRecord, cmd: Command) -> HostRecord:
    """What is left of ``host`` after ``host.delete``: a fresh record of its key, only its operator log kept.

    The queue's pace, hand-outs, counts, seeding and operator state are
    dropped with it (the caller drops the host's URL records: tombstones in
    the urls table); the log keeps who deleted it and when.
    """
    return HostRecord(key=host.key, operator_log=_logged(host.operator_log, cmd))


def apply_to_host(host: HostRecord, cmd: Command) -> HostRecord:
    """``host`` after the host command ``cmd`` (idempotent: applying it twice changes nothing more).

    ``host.delay`` sets the operator's delay of the queue (replaces
    ``fetcher.server.delay`` for it; Crawl-delay, Retry-After and back-off
    still apply on top: :func:`squall.policy.pace.delay_in_force`);
    ``host.block`` holds the queue until ``until_s`` (a later command
    replaces an earlier block, an earlier time shortens it), ``host.unblock``
    ends the block; ``host.limit`` caps the pages fetched
    (:meth:`HostRecord.places`); ``host.delete`` is :func:`deleted`. Every
    command is added to the operator log.

    Raises:
        ValueError: ``cmd`` is crawl-wide.
    """
    if cmd.op.crawl_wide:
        raise ValueError(f"{cmd.op.value} is not a host command")
    if cmd.op is Op.HOST_DELAY:
        host = replace(host, operator_delay_s=cmd.delay_s)
    elif cmd.op is Op.HOST_BLOCK:
        host = replace(host, operator_blocked_until_s=cmd.until_s or 0.0, operator_block_reason=cmd.reason)
    elif cmd.op is Op.HOST_UNBLOCK:
        host = replace(host, operator_blocked_until_s=0.0, operator_block_reason=None)
    elif cmd.op is Op.HOST_LIMIT:
        host = replace(host, page_limit=cmd.pages)
    elif cmd.op is Op.HOST_DELETE:
        return deleted(host, cmd)
    return replace(host, operator_log=_logged(host.operator_log, cmd))


@dataclass(frozen=True)
class CrawlControl:
    """The crawl-wide operator state of one partition (the control table): pause and default delay.

    ``paused``: nothing new starts (URLFrontier's SetActive(false));
    ``delay_s``: the operator's default delay (s), replacing
    ``fetcher.server.delay`` for every queue without a delay of its own (None
    = the configured one); ``log``: the crawl-wide commands applied here.
    """

    paused: bool = False
    delay_s: float | None = None
    log: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"paused": self.paused, "delay_s": self.delay_s, "log": list(self.log)}

    @classmethod
    def from_dict(cls, d: Any) -> CrawlControl:
        """Decode a stored record; a value of another shape is the default state (never raises)."""
        if not isinstance(d, dict):
            return cls()
        delay = d.get("delay_s")
        log = d.get("log")
        return cls(
            paused=d.get("paused") is True,
            delay_s=float(delay) if _number(delay) else None,
            log=[e for e in log if isinstance(e, dict)] if isinstance(log, list) else [],
        )


def crawl_key(partition: int) -> str:
    """The control-table key of partition ``partition``'s :class:`CrawlControl`."""
    return f"crawl:{partition}"


def apply_to_crawl(crawl: CrawlControl, cmd: Command) -> CrawlControl:
    """``crawl`` after the crawl-wide command ``cmd`` (idempotent).

    Raises:
        ValueError: ``cmd`` is a host command.
    """
    if not cmd.op.crawl_wide:
        raise ValueError(f"{cmd.op.value} is not a crawl-wide command")
    if cmd.op is Op.CRAWL_DELAY:
        crawl = replace(crawl, delay_s=cmd.delay_s)
    else:
        crawl = replace(crawl, paused=cmd.op is Op.CRAWL_PAUSE)
    return replace(crawl, log=_logged(crawl.log, cmd))


def pace_config(base: PaceConfig, crawl: CrawlControl | None) -> PaceConfig:
    """The pace settings in force under ``crawl``: its default delay replaces ``fetcher.server.delay``."""
    if crawl is None or crawl.delay_s is None:
        return base
    return replace(base, server_delay_s=crawl.delay_s)


def steer_pace(pace: PaceState, host: HostRecord) -> PaceState:
    """The fetcher's pace of a queue after an operator command changed its record ``host``.

    The operator's delay and block are the record's. A raised delay applies
    to the gap already running (the next start moves to the last end plus
    the new delay), so the host's gaps follow at once; a lowered one applies
    from the next request on (never sooner than the pace already promised).
    """
    steered = replace(
        pace, operator_delay_s=host.operator_delay_s, operator_blocked_until_s=host.operator_blocked_until_s
    )
    new_delay_s = host.operator_delay_s
    if new_delay_s is not None and new_delay_s > pace.delay_s and pace.next_fetch_at_s > 0:
        last_end_s = pace.next_fetch_at_s - pace.delay_s
        steered = replace(steered, delay_s=new_delay_s, next_fetch_at_s=last_end_s + new_delay_s)
    return steered


def hand_back_at(pace: PaceState, paused: bool, now_s: float, lead_s: float) -> float | None:
    """When a URL arriving at the fetcher goes back to the frontier instead of waiting (None: it waits).

    A paused crawl: at once (``now_s``; the frontier hands nothing out until
    it resumes). An operator block ending more than ``lead_s``
    (``frontier.handout.lead.secs``) from now: at the block's end.
    """
    if paused:
        return now_s
    if pace.operator_blocked_until_s - now_s > lead_s:
        return pace.ready_at_s
    return None


def limit_reached(host: HostRecord, in_flight: int) -> bool:
    """Whether ``host``'s page limit leaves no place for the URLs still waiting at the fetcher (``in_flight`` of them)."""
    return host.page_limit is not None and host.pages_fetched + in_flight > host.page_limit


class OperatorState:
    """The crawl-wide operator state one worker's fetcher gate uses: paused partitions, each partition's pace settings.

    Filled from the partitions' :class:`CrawlControl` (:meth:`set`); every
    check is one dict or set lookup (the hot path of each turn and hand-out).
    ``base`` is the configured :class:`squall.policy.pace.PaceConfig`,
    ``partitions`` ``topology.partitions``.
    """

    def __init__(self, base: PaceConfig, partitions: int) -> None:
        self.base = base
        self.partitions = partitions
        self.paused_partitions: set[int] = set()
        self._configs: dict[int, PaceConfig] = {}

    def set(self, partition: int, crawl: CrawlControl) -> None:
        """Take ``crawl`` as the state of ``partition``."""
        self._configs[partition] = pace_config(self.base, crawl)
        if crawl.paused:
            self.paused_partitions.add(partition)
        else:
            self.paused_partitions.discard(partition)

    def pace_config(self, key: str) -> PaceConfig:
        """The pace settings of queue ``key``: the configured ones, or with a ``crawl.delay`` command's default."""
        return self._configs.get(partition_for_key(key, self.partitions), self.base)

    def paused(self, key: str) -> bool:
        """Whether the crawl is paused for queue ``key``'s partition (``crawl.pause``)."""
        return partition_for_key(key, self.partitions) in self.paused_partitions

    def hand_back_at(self, key: str, pace: PaceState, now_s: float, lead_s: float) -> float | None:
        """:func:`hand_back_at` for queue ``key`` (its pace ``pace``) at ``now_s``."""
        return hand_back_at(pace, self.paused(key), now_s, lead_s)
