"""The JSON messages on squall's topics: status, fetch, signals and ticks.

Their statuses and reasons are :mod:`squall.policy.reasons`' enums. Messages
are JSON objects encoded as UTF-8; keys of every topic are the URL's
partition key (see :mod:`squall.policy.partition`) as UTF-8 bytes.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from squall.errors import MessageError
from squall.policy.codec import (
    Field,
    boolean,
    clean,
    decode_fields,
    decode_object,
    field_values,
    finite_float,
    metadata,
    same,
    str_list,
)
from squall.policy.reasons import Reason, Status


@dataclass(frozen=True)
class StatusMessage:
    """A message on the status topic: a URL and what happened to it.

    A seed is ``{"url": "https://example.com/"}``, optionally with
    ``"metadata": {"key": ["value", ...]}``; every other field has a default.

    Fields: ``url`` (as found; canonicalized by the status updater),
    ``status``, ``depth`` (hops from the seed), ``metadata`` (key → list of
    strings), ``reason`` (a :class:`Reason`; on the wire its value), ``http_status``,
    ``redirect_to`` (absolute target of a REDIRECTION), ``fetched_at_s``
    (Unix time, seconds), ``seed`` (true for seeds: their host is in scope),
    ``retry_after_s`` (Unix time before which the URL must not be fetched
    again), ``etag`` / ``last_modified`` (validators for revisits),
    ``priority`` (higher first), ``not_modified`` (a 304 answer),
    ``payload_digest`` (of a fetched body, ``sha1:<base32>``: the adaptive
    schedule compares it with the record's), ``archived_at_s`` (the WARC-Date,
    Unix s, of the full response record holding that payload: this fetch's, or
    the earlier one a revisit record refers to; None: not archived).
    ``moved``: the URL's record (a ``UrlRecord`` dict) from the partition of
    its former key, sent along when its host moved to another address
    (``partition.url.mode: byIP``; never in a batch); absent otherwise.
    ``signal``: the pace report of the hand-out this result ends (a
    :class:`SignalMessage` object, same key), carried by the fetcher's
    result of the handed-out URL itself, so the status updater applies the
    result and frees the hand-out's place in one event and one hosts-table
    write; absent on every other message. ``discovered``: with a result,
    the page's outlinks of the result's own partition (a DISCOVERED batch
    message object, applied before the result in the same event); absent
    otherwise.

    A batch of outlinks of one page to one Kafka partition (what the parse
    step sends: one message per partition instead of one per link) is a
    DISCOVERED message whose ``more_urls`` lists the other URLs, sharing
    ``depth`` and ``metadata``; ``rejected`` counts the links the parse step
    refused, per partition key then per :class:`Reason` (on the wire its
    value: ``{"example.com": {"trap.depth": 2}}``), added to those hosts'
    rejection counts by the status updater.

    What a message means for the URL's record (:func:`squall.policy.schedule.kind_of`):
    no ``fetched_at_s`` is a discovery (whatever ``status`` says); a
    ``fetched_at_s`` is a fetcher result — DISCOVERED with a ``fetched_at_s``
    is the fetcher's "not attempted, due again at ``retry_after_s``", and its
    ``reason`` must say why (one whose :attr:`Reason.not_attempted` is true:
    ``robots.unavailable``, ``fetch.deferred``, ``fetch.address_changed``).
    The wire keeps StormCrawler's status set; the reason carries the meaning.
    """

    url: str
    status: Status = Status.DISCOVERED
    depth: int = 0
    metadata: dict[str, list[str]] = field(default_factory=dict)
    reason: Reason | None = None
    http_status: int | None = None
    redirect_to: str | None = None
    fetched_at_s: float | None = None
    seed: bool = False
    retry_after_s: float | None = None
    etag: str | None = None
    last_modified: str | None = None
    priority: int | None = None
    not_modified: bool = False
    truncated: bool = False
    payload_digest: str | None = None
    archived_at_s: float | None = None
    chain: list[str] = field(default_factory=list)
    more_urls: list[str] = field(default_factory=list)
    rejected: dict[str, dict[Reason, int]] = field(default_factory=dict)
    moved: dict[str, Any] | None = None
    signal: SignalMessage | None = None
    discovered: StatusMessage | None = None

    def to_bytes(self) -> bytes:
        """UTF-8 JSON; fields that are None, or an empty ``more_urls``/``rejected``, are left out."""
        return json.dumps(self._to_dict(), separators=(",", ":")).encode()

    def _to_dict(self) -> dict[str, Any]:
        obj = field_values(self)
        obj["status"] = self.status.value
        if self.reason is not None:
            obj["reason"] = self.reason.value
        for name in ("more_urls", "rejected"):
            if not obj[name]:
                del obj[name]
        if self.rejected:
            obj["rejected"] = {key: {r.value: n for r, n in counts.items()} for key, counts in self.rejected.items()}
        if self.signal is not None:
            obj["signal"] = self.signal.to_dict()
        if self.discovered is not None:
            obj["discovered"] = self.discovered._to_dict()
        return {k: v for k, v in obj.items() if v is not None}

    @classmethod
    def from_bytes(cls, raw: bytes) -> StatusMessage:
        """Decode one status message.

        Raises:
            MessageError: not JSON, not an object, no string ``url``, unknown
                status or reason, a field of the wrong type, a DISCOVERED
                result (``fetched_at_s`` set) whose reason is not a
                "not attempted" one, or a ``signal`` / ``discovered`` on a
                message that is not a result (or a ``discovered`` that is not
                a plain DISCOVERED message).
        """
        return cls._from_dict(decode_object(raw))

    @classmethod
    def _from_dict(cls, obj: dict[str, Any]) -> StatusMessage:
        url = obj.get("url")
        if not isinstance(url, str) or not url:
            raise MessageError("status message needs a non-empty string 'url'")
        kwargs = decode_fields(obj, _STATUS_DECODE, "status")
        status = kwargs.get("status", Status.DISCOVERED)
        if (
            status is Status.DISCOVERED
            and kwargs.get("fetched_at_s") is not None
            and not (kwargs.get("reason") is not None and kwargs["reason"].not_attempted)
        ):
            raise MessageError(
                f"a DISCOVERED result (with fetched_at_s) needs a 'not attempted' reason, got {obj.get('reason')!r}"
            )
        more = obj.get("more_urls")
        if more:
            if not isinstance(more, list) or not all(isinstance(u, str) and u for u in more):
                raise MessageError("field 'more_urls' must be a list of non-empty strings")
            if status is not Status.DISCOVERED or kwargs.get("fetched_at_s") is not None:
                raise MessageError("'more_urls' is only for DISCOVERED messages without fetched_at_s")
            kwargs["more_urls"] = more
        rejected = obj.get("rejected")
        if rejected:
            if not isinstance(rejected, dict) or not all(
                isinstance(key, str)
                and key
                and isinstance(counts, dict)
                and all(
                    r in _REASONS and isinstance(n, int) and not isinstance(n, bool) and n > 0
                    for r, n in counts.items()
                )
                for key, counts in rejected.items()
            ):
                raise MessageError("field 'rejected' must map partition keys to Reason values to positive counts")
            kwargs["rejected"] = {key: {Reason.of(r): n for r, n in counts.items()} for key, counts in rejected.items()}
        signal = obj.get("signal")
        if signal is not None:
            if kwargs.get("fetched_at_s") is None:
                raise MessageError("'signal' is only for fetcher results (with fetched_at_s)")
            kwargs["signal"] = SignalMessage.from_dict(signal)
        discovered = obj.get("discovered")
        if discovered is not None:
            if kwargs.get("fetched_at_s") is None or not isinstance(discovered, dict):
                raise MessageError("'discovered' is an object, only for fetcher results (with fetched_at_s)")
            batch = cls._from_dict(discovered)
            if batch.fetched_at_s is not None or batch.status is not Status.DISCOVERED or batch.discovered is not None:
                raise MessageError("'discovered' must be a DISCOVERED message without fetched_at_s")
            kwargs["discovered"] = batch
        return cls(**kwargs)

    def urls(self) -> list[str]:
        """``url`` then ``more_urls``: every URL this message is about."""
        return [self.url, *self.more_urls]


_REASONS = frozenset(r.value for r in Reason)


@dataclass(frozen=True)
class FetchMessage:
    """A message on the fetch topic: one URL handed out by the spout.

    ``handed_out_at_s`` is the spout's clock (Unix seconds); ``attempt`` counts
    fetches of this URL so far (0 for the first); ``etag``/``last_modified``
    are sent as If-None-Match / If-Modified-Since on a revisit;
    ``payload_digest`` / ``archived_at_s``: the digest of the URL's last
    archived full response and that record's WARC-Date (Unix s), so an
    unchanged payload is archived as a revisit of it (``warc.revisits``).
    """

    url: str
    key: str
    depth: int = 0
    metadata: dict[str, list[str]] = field(default_factory=dict)
    attempt: int = 0
    handed_out_at_s: float = 0.0
    etag: str | None = None
    last_modified: str | None = None
    chain: list[str] = field(default_factory=list)
    payload_digest: str | None = None
    archived_at_s: float | None = None

    def to_bytes(self) -> bytes:
        return json.dumps(clean(field_values(self)), separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> FetchMessage:
        """Decode one fetch message.

        Raises:
            MessageError: not a JSON object, ``url`` or ``key`` missing, a
                field that does not convert, or a non-finite hand-out time.
        """
        return cls(**decode_fields(decode_object(raw), _FETCH_DECODE, "fetch"))


class SignalKind(str, Enum):
    """What one fetch told about its host's pace (StormCrawler CrawlDelayPolicy, #1973, #1984)."""

    SUCCESS = "success"  # answered without a rate limit: back-off resets
    RETRY_AFTER = "retry_after"  # 429/503 with a valid Retry-After: host blocked until retry_until_s
    RATE_LIMITED = "rate_limited"  # 429/503 without it: exponential back-off with jitter
    OTHER = "other"  # any other outcome (error, or no request made): pace only


@dataclass(frozen=True)
class SignalMessage:
    """A message on the signals topic (keyed by the queue's partition key), one per handed-out URL.

    The queue regulator applies it to the hosts table with the same pace
    model the fetcher used (:func:`squall.policy.pace.after_fetch`): it frees the
    hand-out place of ``url`` and records the queue's pace after the fetch.
    ``fetch_id`` identifies the fetch so re-delivery is idempotent. Times are
    Unix seconds. ``requested``: a request reached the host (False: decided
    without one, e.g. robots denial or a deferral). ``crawl_delay_s``: the
    host's robots Crawl-delay after the ``fetcher.max.crawl.delay`` cap (s,
    None = none). ``delay_s``: the delay in force the fetcher computed (s,
    informative). ``retry_until_s``: the Retry-After time of a RETRY_AFTER.
    ``robots_crawl_delay_s``: metadata ``robots.crawl.delay`` (whole seconds,
    only when the fetcher capped a Crawl-delay, StormCrawler's CrawlDelayPolicy).
    ``handed_out_at_s``: the spout's hand-out time of the fetch, so a late or
    re-delivered signal never frees a newer hand-out of the same URL.
    """

    key: str
    url: str
    fetch_id: str
    kind: SignalKind
    at_s: float
    requested: bool = True
    delay_s: float = 0.0
    crawl_delay_s: float | None = None
    retry_until_s: float | None = None
    robots_crawl_delay_s: int | None = None
    handed_out_at_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this signal (None fields left out)."""
        return clean(field_values(self))

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_dict(), separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> SignalMessage:
        """Decode one signals-topic message.

        Raises:
            MessageError: not a JSON object, or see :meth:`from_dict`.
        """
        return cls.from_dict(decode_object(raw))

    @classmethod
    def from_dict(cls, obj: Any) -> SignalMessage:
        """Decode a signal object (alone on the signals topic, or inside a status message).

        Raises:
            MessageError: not an object, a field missing or of the wrong type,
                an unknown kind, or a non-finite time.
        """
        if not isinstance(obj, dict):
            raise MessageError("a signal must be a JSON object")
        return cls(**decode_fields(obj, _SIGNAL_DECODE, "signal"))


@dataclass(frozen=True)
class TickMessage:
    """A message on the ticks topic (key ``b"tick"``): the spout's timer wakes the spout of one partition it owns.

    ``partition``: the Kafka partition it is sent to; ``sent_at_s``: when (Unix
    seconds, written to the millisecond). The spout takes the partition from
    the Kafka record and never decodes the value (anything on the topic is a
    harmless tick); the value is for people (Kafka UI, ``squall tail ticks``).
    """

    partition: int
    sent_at_s: float

    def to_bytes(self) -> bytes:
        """UTF-8 JSON ``{"partition": p, "sent_at_s": t}``."""
        obj = {"partition": self.partition, "sent_at_s": round(self.sent_at_s, 3)}
        return json.dumps(obj, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> TickMessage:
        """Decode one ticks-topic message.

        Raises:
            MessageError: not a JSON object, a field missing or that does not
                convert, or a non-finite time.
        """
        return cls(**decode_fields(decode_object(raw), _TICK_DECODE, "tick"))


# ---------------------------------------------------------------- the one decode path of every message
#
# A message is a JSON object; each topic's fields are read by one table of :class:`Field` and
# :func:`decode_fields`. What each reader accepts is the topic's: status messages check types
# strictly (a client writes them), fetch and signal messages convert (squall writes them).


def _typed(name: str, typ: type | tuple[type, ...]) -> Field:
    """A status-message field of JSON type ``typ`` (no conversion; a boolean is no number; numbers finite)."""

    def read(value: Any) -> Any:
        if not isinstance(value, typ) or (typ is not bool and isinstance(value, bool)):
            raise MessageError(f"field {name!r} has the wrong type: {value!r}")
        if isinstance(value, float) and not math.isfinite(value):
            raise MessageError(f"field {name!r} must be a finite number: {value!r}")
        if name == "chain" and not all(isinstance(u, str) for u in value):  # type: ignore[attr-defined]
            raise MessageError("field 'chain' must be a list of strings")
        return value

    return Field(name, read, null_is_absent=True)


def _status(value: Any) -> Status:
    try:
        return Status(value)
    except ValueError:
        raise MessageError(f"unknown status {value!r}") from None


_STATUS_DECODE = (
    Field("url", same),  # checked before: a non-empty string
    Field("status", _status),
    Field("metadata", metadata),
    *(
        _typed(name, typ)
        for name, typ in (
            ("depth", int),
            ("http_status", int),
            ("redirect_to", str),
            ("fetched_at_s", (int, float)),
            ("seed", bool),
            ("retry_after_s", (int, float)),
            ("etag", str),
            ("last_modified", str),
            ("priority", int),
            ("not_modified", bool),
            ("truncated", bool),
            ("payload_digest", str),
            ("archived_at_s", (int, float)),
            ("chain", list),
            ("moved", dict),
        )
    ),
    Field("reason", Reason.parse, null_is_absent=True),
)

_FETCH_DECODE = (
    Field("url", str, required=True),
    Field("key", str, required=True),
    Field("depth", int),
    Field("metadata", metadata),
    Field("attempt", int),
    Field("handed_out_at_s", finite_float("handed_out_at_s")),
    Field("etag", same),
    Field("last_modified", same),
    Field("chain", lambda value: str_list(value, "chain")),
    Field("payload_digest", str, null_is_absent=True),
    Field("archived_at_s", float, null_is_absent=True),
)

_SIGNAL_DECODE = (
    Field("key", str, required=True),
    Field("url", str, required=True),
    Field("fetch_id", str, required=True),
    Field("kind", SignalKind, required=True),
    Field("at_s", finite_float("at_s"), required=True),
    Field("requested", boolean("requested")),
    Field("delay_s", finite_float("delay_s")),
    Field("crawl_delay_s", finite_float("crawl_delay_s"), null_is_absent=True),
    Field("retry_until_s", finite_float("retry_until_s"), null_is_absent=True),
    Field("robots_crawl_delay_s", int, null_is_absent=True),
    Field("handed_out_at_s", finite_float("handed_out_at_s"), null_is_absent=True),
)

_TICK_DECODE = (
    Field("partition", int, required=True),
    Field("sent_at_s", finite_float("sent_at_s"), required=True),
)
