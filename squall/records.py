"""URL status, failure reasons, and the JSON messages on squall's topics.

One enum for the status of a URL (StormCrawler's ``Status``), one enum for the
reason a URL ended where it did (instead of free-text ``error.cause``), and the
message shapes of the status, fetch and signals topics. Messages are JSON
objects encoded as UTF-8; keys of every topic are the URL's partition key
(see :mod:`squall.partition`) as UTF-8 bytes.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from squall.errors import MessageError


class Status(str, Enum):
    """Status of a URL in the frontier (StormCrawler's com.digitalpebble.stormcrawler.persistence.Status)."""

    DISCOVERED = "DISCOVERED"
    FETCHED = "FETCHED"
    REDIRECTION = "REDIRECTION"
    FETCH_ERROR = "FETCH_ERROR"
    ERROR = "ERROR"

    @property
    def final(self) -> bool:
        """True for a status that ends a URL unless a revisit is scheduled."""
        return self in (Status.FETCHED, Status.REDIRECTION, Status.ERROR)


class Reason(str, Enum):
    """Why a URL was rejected, failed or ended in ERROR (one code per cause)."""

    # malformed input
    MESSAGE_INVALID = "message.invalid"
    URL_MALFORMED = "url.malformed"
    URL_SCHEME = "url.scheme"
    URL_HOST = "url.host"
    URL_USERINFO = "url.userinfo"
    URL_TOO_LONG = "url.too_long"
    # scope and trap guards (seed 002 a–d) — policy rejections, never fetch failures
    SCOPE_HOST = "scope.host"
    SCOPE_REGEX = "scope.regex"
    TRAP_DEPTH = "trap.depth"
    TRAP_HOST_CAP = "trap.host_cap"
    TRAP_QUERY_PARAMS = "trap.query_params"
    TRAP_REPEATED_SEGMENTS = "trap.repeated_segments"
    # robots.txt (RFC 9309) and Crawl-delay (seed 000)
    ROBOTS_DENIED = "robots.denied"
    CRAWL_DELAY_TOO_LONG = "crawl_delay.too_long"
    # redirects
    REDIRECT_LOOP = "redirect.loop"
    REDIRECT_TOO_MANY = "redirect.too_many"
    # HTTP answers
    HTTP_NOT_FOUND = "http.not_found"
    HTTP_CLIENT_ERROR = "http.client_error"
    HTTP_SERVER_ERROR = "http.server_error"
    HTTP_RATE_LIMITED = "http.rate_limited"
    # transport failures (transient: FETCH_ERROR, retried up to max.fetch.errors)
    FETCH_TIMEOUT = "fetch.timeout"
    FETCH_DNS = "fetch.dns"
    FETCH_CONNECTION = "fetch.connection"
    FETCH_PROTOCOL = "fetch.protocol"
    FETCH_BLOCKED_ADDRESS = "fetch.blocked_address"
    FETCH_TOO_MANY_ERRORS = "fetch.too_many_errors"


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.value if isinstance(v, Enum) else v) for k, v in d.items() if v is not None}


@dataclass(frozen=True)
class StatusMessage:
    """A message on the status topic: a URL and what happened to it.

    A seed is ``{"url": "https://example.com/"}``, optionally with
    ``"metadata": {"key": ["value", ...]}``; every other field has a default.

    Fields: ``url`` (as found; canonicalized by the status updater),
    ``status``, ``depth`` (hops from the seed), ``metadata`` (key → list of
    strings), ``reason`` (a :class:`Reason` value), ``http_status``,
    ``redirect_to`` (absolute target of a REDIRECTION), ``fetched_at_s``
    (Unix time, seconds), ``seed`` (true for seeds: their host is in scope),
    ``retry_after_s`` (Unix time before which the URL must not be fetched
    again), ``etag`` / ``last_modified`` (validators for revisits),
    ``priority`` (higher first), ``not_modified`` (a 304 answer).
    """

    url: str
    status: Status = Status.DISCOVERED
    depth: int = 0
    metadata: dict[str, list[str]] = field(default_factory=dict)
    reason: str | None = None
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
    chain: list[str] = field(default_factory=list)

    def to_bytes(self) -> bytes:
        return json.dumps(_clean(asdict(self)), separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> "StatusMessage":
        """Decode one status message.

        Raises:
            MessageError: not JSON, not an object, no string ``url``, unknown
                status, or a field of the wrong type.
        """
        obj = _decode_object(raw)
        url = obj.get("url")
        if not isinstance(url, str) or not url:
            raise MessageError("status message needs a non-empty string 'url'")
        try:
            status = Status(obj.get("status", "DISCOVERED"))
        except ValueError:
            raise MessageError(f"unknown status {obj.get('status')!r}") from None
        metadata = _metadata(obj.get("metadata", {}))
        kwargs: dict[str, Any] = {}
        for name, typ in (("depth", int), ("reason", str), ("http_status", int), ("redirect_to", str),
                          ("fetched_at_s", (int, float)), ("seed", bool), ("retry_after_s", (int, float)),
                          ("etag", str), ("last_modified", str), ("priority", int), ("not_modified", bool),
                          ("truncated", bool), ("chain", list)):
            if name in obj and obj[name] is not None:
                value = obj[name]
                if not isinstance(value, typ) or (typ is not bool and isinstance(value, bool)):
                    raise MessageError(f"field {name!r} has the wrong type: {value!r}")
                if isinstance(value, float) and not math.isfinite(value):
                    raise MessageError(f"field {name!r} must be a finite number: {value!r}")
                if name == "chain" and not all(isinstance(u, str) for u in value):
                    raise MessageError("field 'chain' must be a list of strings")
                kwargs[name] = value
        return cls(url=url, status=status, metadata=metadata, **kwargs)


@dataclass(frozen=True)
class FetchMessage:
    """A message on the fetch topic: one URL handed out by the spout.

    ``handed_out_at_s`` is the spout's clock (Unix seconds); ``attempt`` counts
    fetches of this URL so far (0 for the first); ``etag``/``last_modified``
    are sent as If-None-Match / If-Modified-Since on a revisit.
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

    def to_bytes(self) -> bytes:
        return json.dumps(_clean(asdict(self)), separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> "FetchMessage":
        obj = _decode_object(raw)
        try:
            msg = cls(url=str(obj["url"]), key=str(obj["key"]), depth=int(obj.get("depth", 0)),
                       metadata=_metadata(obj.get("metadata", {})), attempt=int(obj.get("attempt", 0)),
                       handed_out_at_s=float(obj.get("handed_out_at_s", 0.0)), etag=obj.get("etag"),
                       last_modified=obj.get("last_modified"), chain=_str_list(obj.get("chain", []), "chain"))
            # a non-finite time (NaN, inf) would poison the due index and the pace model
            _finite(msg.handed_out_at_s, "handed_out_at_s")
            return msg
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise MessageError(f"bad fetch message: {exc}") from None


class SignalKind(str, Enum):
    """What one fetch told about its host's pace (seed 000, StormCrawler #1973/#1984, seed 002)."""

    SUCCESS = "success"            # answered without a rate limit: back-off resets
    RETRY_AFTER = "retry_after"    # 429/503 with a valid Retry-After: host blocked until retry_until_s
    RATE_LIMITED = "rate_limited"  # 429/503 without it: exponential back-off with jitter
    OTHER = "other"                # any other outcome (error, or no request made): pace only


@dataclass(frozen=True)
class SignalMessage:
    """A message on the signals topic (keyed by the queue's partition key), one per handed-out URL.

    The queue regulator applies it to the hosts table: it frees the hand-out
    slot of ``url``, sets the next eligible time to ``at_s + delay_s`` and
    applies Retry-After, back-off and the forwarded robots Crawl-delay.
    ``fetch_id`` identifies the fetch so re-delivery is idempotent. Times are
    Unix seconds; ``delay_s`` is the delay the fetcher had in force for the
    queue (0 when no request was made); ``robots_crawl_delay_s`` is metadata
    ``robots.crawl.delay`` (whole seconds, only when the fetcher capped a
    Crawl-delay, seed 000); ``handed_out_at_s`` is the spout's hand-out
    time of the fetch, so a late or re-delivered signal never frees a newer
    hand-out of the same URL.
    """

    key: str
    url: str
    fetch_id: str
    kind: SignalKind
    at_s: float
    delay_s: float = 0.0
    retry_until_s: float | None = None
    robots_crawl_delay_s: int | None = None
    handed_out_at_s: float | None = None

    def to_bytes(self) -> bytes:
        return json.dumps(_clean(asdict(self)), separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> "SignalMessage":
        obj = _decode_object(raw)
        try:
            retry = obj.get("retry_until_s")
            robots = obj.get("robots_crawl_delay_s")
            handed = obj.get("handed_out_at_s")
            msg = cls(key=str(obj["key"]), url=str(obj["url"]), fetch_id=str(obj["fetch_id"]),
                       kind=SignalKind(obj["kind"]), at_s=float(obj["at_s"]),
                       delay_s=float(obj.get("delay_s", 0.0)),
                       retry_until_s=None if retry is None else float(retry),
                       robots_crawl_delay_s=None if robots is None else int(robots),
                       handed_out_at_s=None if handed is None else float(handed))
            for name in ("at_s", "delay_s", "retry_until_s", "handed_out_at_s"):
                _finite(getattr(msg, name), name)
            return msg
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise MessageError(f"bad signal message: {exc}") from None


def _str_list(value: Any, name: str) -> list[str]:
    """A JSON list of strings, else ValueError (a bare string is not a list of URLs)."""
    if not isinstance(value, list) or not all(isinstance(u, str) for u in value):
        raise ValueError(f"{name} must be a list of strings")
    return list(value)


def _finite(value: float | None, name: str) -> None:
    """Raise ValueError for a NaN or infinite number (JSON allows them through NaN/Infinity/1e999)."""
    if value is not None and not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")


def _decode_object(raw: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except (ValueError, TypeError) as exc:
        raise MessageError(f"not JSON: {exc}") from None
    except RecursionError:
        raise MessageError("not JSON: nested too deeply") from None
    if not isinstance(obj, dict):
        raise MessageError("expected a JSON object")
    return obj


def _metadata(value: Any) -> dict[str, list[str]]:
    """Normalize metadata to key → list of strings (a single string becomes a one-item list)."""
    if not isinstance(value, dict):
        raise MessageError("'metadata' must be an object")
    out: dict[str, list[str]] = {}
    for k, v in value.items():
        if isinstance(v, str):
            out[str(k)] = [v]
        elif isinstance(v, list) and all(isinstance(x, str) for x in v):
            out[str(k)] = list(v)
        else:
            raise MessageError(f"metadata {k!r} must be a string or a list of strings")
    return out
