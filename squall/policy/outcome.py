"""What one fetch means: URL status, reason and the pace signal for its host.

Pure mapping from an HTTP answer (or a transport failure) to an
:class:`Outcome`; the fetcher turns it into a status message and a signal.
Sources: transient vs permanent failures, StormCrawler #1973 (Retry-After)
and #1984 (headerless 429/503 back-off), RFC 9110 §15 (status classes).

====================  ===========  =========================  ===============
answer                status       reason                     signal
====================  ===========  =========================  ===============
2xx                   FETCHED      –                          SUCCESS
304 (revisit)         FETCHED      – (not_modified)           SUCCESS
3xx + Location        REDIRECTION  –                          SUCCESS
3xx, target in chain  ERROR        redirect.loop              SUCCESS
3xx, chain too long   ERROR        redirect.too_many          SUCCESS
3xx, no Location      ERROR        fetch.protocol             SUCCESS
404, 410              ERROR        http.not_found             SUCCESS
429/503 + Retry-After FETCH_ERROR  http.rate_limited          RETRY_AFTER
 in the future
429/503 without, or   FETCH_ERROR  http.rate_limited          RATE_LIMITED
 Retry-After 0, past
 or invalid
other 4xx             ERROR        http.client_error          SUCCESS
other 5xx             FETCH_ERROR  http.server_error          OTHER
timeout/DNS/conn      FETCH_ERROR  fetch.timeout/dns/...      OTHER
blocked address       ERROR        fetch.blocked_address      OTHER (no request)
====================  ===========  =========================  ===============

A rate-limited URL is rescheduled, not failed: the pace model
(:mod:`squall.policy.pace`) turns the signal into the host's block (the whole
Retry-After up to ``frontier.retry.after.max.secs``, or the exponential
back-off when Retry-After is absent, 0, past or invalid), and the URL is due
again when that block ends.
"""

from __future__ import annotations

from dataclasses import dataclass

from squall.errors import InvalidURL
from squall.policy.backoff import parse_retry_after
from squall.policy.reasons import Reason, Status
from squall.policy.records import SignalKind
from squall.policy.urls import NormalizerConfig, canonicalize

RATE_LIMIT_STATUSES = (429, 503)


@dataclass(frozen=True)
class Outcome:
    """Status, reason and signal of one fetch. Times are Unix seconds."""

    status: Status
    signal: SignalKind
    reason: Reason | None = None
    http_status: int | None = None
    redirect_to: str | None = None
    retry_after_s: float | None = None
    not_modified: bool = False
    parse: bool = False  # the body should go to the parser


def classify_http(
    status: int,
    *,
    url: str,
    location: str | None,
    retry_after: str | None,
    chain: list[str],
    now_s: float,
    max_redirects: int,
    normalizer: NormalizerConfig,
) -> Outcome:
    """Classify an HTTP answer ``status`` for ``url`` (see the module table).

    ``location`` is the absolute redirect target (None if absent);
    ``retry_after`` the raw Retry-After header; ``chain`` the redirect chain
    that led to ``url`` (oldest first); ``max_redirects`` is
    ``http.redirect.max``. ``retry_after_s`` of a RETRY_AFTER outcome is the
    header's time, uncapped (the pace model caps it); a Retry-After of 0, in
    the past or invalid is no Retry-After at all (RATE_LIMITED: back-off).
    """
    if 200 <= status < 300:
        return Outcome(Status.FETCHED, SignalKind.SUCCESS, http_status=status, parse=True)
    if status == 304:
        return Outcome(Status.FETCHED, SignalKind.SUCCESS, http_status=status, not_modified=True)
    if 300 <= status < 400:
        return _redirect(status, url, location, chain, max_redirects, normalizer)
    if status in RATE_LIMIT_STATUSES:
        until = parse_retry_after(retry_after, now_s)
        if until is not None and until > now_s:
            return Outcome(
                Status.FETCH_ERROR, SignalKind.RETRY_AFTER, Reason.HTTP_RATE_LIMITED, status, retry_after_s=until
            )
        return Outcome(
            Status.FETCH_ERROR, SignalKind.RATE_LIMITED, Reason.HTTP_RATE_LIMITED, status, retry_after_s=now_s
        )
    if status in (404, 410):
        return Outcome(Status.ERROR, SignalKind.SUCCESS, Reason.HTTP_NOT_FOUND, status)
    if 400 <= status < 500:
        return Outcome(Status.ERROR, SignalKind.SUCCESS, Reason.HTTP_CLIENT_ERROR, status)
    if 500 <= status < 600:
        return Outcome(Status.FETCH_ERROR, SignalKind.OTHER, Reason.HTTP_SERVER_ERROR, status)
    return Outcome(Status.ERROR, SignalKind.OTHER, Reason.FETCH_PROTOCOL, status)


def classify_failure(reason: Reason) -> Outcome:
    """Classify a transport failure (the :class:`squall.errors.FetchError` reason).

    ``fetch.blocked_address`` and ``url.*`` (the URL cannot be fetched) are
    permanent: ERROR. Any other reason is transient: FETCH_ERROR with it.
    """
    if reason is Reason.FETCH_BLOCKED_ADDRESS or reason.is_url:
        return Outcome(Status.ERROR, SignalKind.OTHER, reason)
    return Outcome(Status.FETCH_ERROR, SignalKind.OTHER, reason)


def _redirect(
    status: int, url: str, location: str | None, chain: list[str], max_redirects: int, normalizer: NormalizerConfig
) -> Outcome:
    if not location:
        return Outcome(Status.ERROR, SignalKind.SUCCESS, Reason.FETCH_PROTOCOL, status)
    try:
        target = canonicalize(location, normalizer, base=url)
    except InvalidURL as exc:
        return Outcome(Status.ERROR, SignalKind.SUCCESS, exc.reason, status)
    if target == url or target in chain:
        return Outcome(Status.ERROR, SignalKind.SUCCESS, Reason.REDIRECT_LOOP, status, redirect_to=target)
    if len(chain) + 1 > max_redirects:
        return Outcome(Status.ERROR, SignalKind.SUCCESS, Reason.REDIRECT_TOO_MANY, status, redirect_to=target)
    return Outcome(Status.REDIRECTION, SignalKind.SUCCESS, http_status=status, redirect_to=target)
