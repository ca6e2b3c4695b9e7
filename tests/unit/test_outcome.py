"""Tests of squall.policy.outcome: the module's table of answers, one row per case (StormCrawler #1973, #1984)."""

from __future__ import annotations

from dataclasses import replace

from datetime import datetime, timezone

import pytest

from squall.policy.outcome import Outcome, classify_failure, classify_http
from squall.policy.records import SignalKind
from squall.policy.reasons import Reason, ReasonCategory, Status
from squall.settings import load_settings
from squall.policy.urls import NormalizerConfig

# The defaults file's normalizer with no query parameter removed (each test names what it removes).
NO_REMOVALS = replace(NormalizerConfig.from_settings(load_settings()), query_remove=())

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc).timestamp()  # the fake clock
URL = "https://example.com/a"
MAX_REDIRECTS = 5
NORMALIZER = replace(NO_REMOVALS, query_remove=("utm_*",))
CHAIN_4 = [f"https://example.com/r{i}" for i in range(4)]
CHAIN_5 = CHAIN_4 + ["https://example.com/r4"]

S, R = Status, SignalKind

HTTP_CASES = [
    # id, (status, location, retry_after, chain), expected Outcome
    ("200", (200, None, None, []), Outcome(S.FETCHED, R.SUCCESS, http_status=200, parse=True)),
    ("204", (204, None, None, []), Outcome(S.FETCHED, R.SUCCESS, http_status=204, parse=True)),
    ("304 revisit", (304, None, None, []), Outcome(S.FETCHED, R.SUCCESS, http_status=304, not_modified=True)),
    ("301 + Location", (301, "https://example.com/b", None, []),
     Outcome(S.REDIRECTION, R.SUCCESS, http_status=301, redirect_to="https://example.com/b")),
    ("302 relative Location", (302, "/b?utm_source=x", None, []),
     Outcome(S.REDIRECTION, R.SUCCESS, http_status=302, redirect_to="https://example.com/b")),
    ("308 other host", (308, "HTTPS://Other.Example:443/x", None, []),
     Outcome(S.REDIRECTION, R.SUCCESS, http_status=308, redirect_to="https://other.example/x")),
    ("301 no Location", (301, None, None, []), Outcome(S.ERROR, R.SUCCESS, Reason.FETCH_PROTOCOL, 301)),
    ("301 empty Location", (301, "", None, []), Outcome(S.ERROR, R.SUCCESS, Reason.FETCH_PROTOCOL, 301)),
    ("301 to self", (301, URL, None, []), Outcome(S.ERROR, R.SUCCESS, Reason.REDIRECT_LOOP, 301, redirect_to=URL)),
    ("301 to self, other spelling", (301, "HTTPS://EXAMPLE.COM:443/a#frag", None, []),
     Outcome(S.ERROR, R.SUCCESS, Reason.REDIRECT_LOOP, 301, redirect_to=URL)),
    ("302 into the chain", (302, "https://example.com/r1", None, CHAIN_4),
     Outcome(S.ERROR, R.SUCCESS, Reason.REDIRECT_LOOP, 302, redirect_to="https://example.com/r1")),
    ("301 last allowed hop", (301, "https://example.com/b", None, CHAIN_4),
     Outcome(S.REDIRECTION, R.SUCCESS, http_status=301, redirect_to="https://example.com/b")),
    ("301 chain too long", (301, "https://example.com/b", None, CHAIN_5),
     Outcome(S.ERROR, R.SUCCESS, Reason.REDIRECT_TOO_MANY, 301, redirect_to="https://example.com/b")),
    ("301 to a bad scheme", (301, "ftp://example.com/b", None, []),
     Outcome(S.ERROR, R.SUCCESS, Reason.URL_SCHEME, 301)),
    ("301 with userinfo: followed without it", (301, "https://user:pw@example.com/b", None, []),
     Outcome(S.REDIRECTION, R.SUCCESS, http_status=301, redirect_to="https://example.com/b")),
    ("404", (404, None, None, []), Outcome(S.ERROR, R.SUCCESS, Reason.HTTP_NOT_FOUND, 404)),
    ("410", (410, None, None, []), Outcome(S.ERROR, R.SUCCESS, Reason.HTTP_NOT_FOUND, 410)),
    ("403", (403, None, None, []), Outcome(S.ERROR, R.SUCCESS, Reason.HTTP_CLIENT_ERROR, 403)),
    ("400", (400, None, None, []), Outcome(S.ERROR, R.SUCCESS, Reason.HTTP_CLIENT_ERROR, 400)),
    ("451", (451, None, None, []), Outcome(S.ERROR, R.SUCCESS, Reason.HTTP_CLIENT_ERROR, 451)),
    ("500", (500, None, None, []), Outcome(S.FETCH_ERROR, R.OTHER, Reason.HTTP_SERVER_ERROR, 500)),
    ("502", (502, None, None, []), Outcome(S.FETCH_ERROR, R.OTHER, Reason.HTTP_SERVER_ERROR, 502)),
    ("504 with Retry-After", (504, None, "30", []), Outcome(S.FETCH_ERROR, R.OTHER, Reason.HTTP_SERVER_ERROR, 504)),
    ("199 not HTTP", (199, None, None, []), Outcome(S.ERROR, R.OTHER, Reason.FETCH_PROTOCOL, 199)),
    ("600 not HTTP", (600, None, None, []), Outcome(S.ERROR, R.OTHER, Reason.FETCH_PROTOCOL, 600)),
]

for _code in (429, 503):
    HTTP_CASES += [
        (f"{_code} Retry-After delta", (_code, None, "30", []),
         Outcome(S.FETCH_ERROR, R.RETRY_AFTER, Reason.HTTP_RATE_LIMITED, _code, retry_after_s=NOW + 30)),
        (f"{_code} Retry-After 0", (_code, None, "0", []),  # no usable Retry-After: back-off
         Outcome(S.FETCH_ERROR, R.RATE_LIMITED, Reason.HTTP_RATE_LIMITED, _code, retry_after_s=NOW)),
        (f"{_code} Retry-After HTTP-date", (_code, None, "Wed, 01 May 2024 12:00:45 GMT", []),
         Outcome(S.FETCH_ERROR, R.RETRY_AFTER, Reason.HTTP_RATE_LIMITED, _code, retry_after_s=NOW + 45)),
        (f"{_code} Retry-After past date", (_code, None, "Tue, 30 Apr 2024 12:00:00 GMT", []),
         Outcome(S.FETCH_ERROR, R.RATE_LIMITED, Reason.HTTP_RATE_LIMITED, _code, retry_after_s=NOW)),
        # never cut to frontier.backoff.max.secs here: the pace model caps at frontier.retry.after.max.secs
        (f"{_code} Retry-After a day", (_code, None, "86400", []),
         Outcome(S.FETCH_ERROR, R.RETRY_AFTER, Reason.HTTP_RATE_LIMITED, _code, retry_after_s=NOW + 86400)),
        (f"{_code} Retry-After date a day away", (_code, None, "Thu, 02 May 2024 12:00:00 GMT", []),
         Outcome(S.FETCH_ERROR, R.RETRY_AFTER, Reason.HTTP_RATE_LIMITED, _code, retry_after_s=NOW + 86400)),
        (f"{_code} Retry-After RFC 850 date", (_code, None, "Wednesday, 01-May-24 12:00:45 GMT", []),
         Outcome(S.FETCH_ERROR, R.RETRY_AFTER, Reason.HTTP_RATE_LIMITED, _code, retry_after_s=NOW + 45)),
        (f"{_code} Retry-After date not in GMT", (_code, None, "Wed, 01 May 2024 14:00:45 +0200", []),
         Outcome(S.FETCH_ERROR, R.RATE_LIMITED, Reason.HTTP_RATE_LIMITED, _code, retry_after_s=NOW)),
        (f"{_code} Retry-After invalid", (_code, None, "soon", []),
         Outcome(S.FETCH_ERROR, R.RATE_LIMITED, Reason.HTTP_RATE_LIMITED, _code, retry_after_s=NOW)),
        (f"{_code} Retry-After negative", (_code, None, "-5", []),
         Outcome(S.FETCH_ERROR, R.RATE_LIMITED, Reason.HTTP_RATE_LIMITED, _code, retry_after_s=NOW)),
        (f"{_code} no Retry-After", (_code, None, None, []),
         Outcome(S.FETCH_ERROR, R.RATE_LIMITED, Reason.HTTP_RATE_LIMITED, _code, retry_after_s=NOW)),
    ]


@pytest.mark.parametrize(("answer", "expected"), [c[1:] for c in HTTP_CASES], ids=[c[0] for c in HTTP_CASES])
def test_classify_http_follows_the_module_table(answer, expected):
    status, location, retry_after, chain = answer
    got = classify_http(status, url=URL, location=location, retry_after=retry_after, chain=chain, now_s=NOW,
                        max_redirects=MAX_REDIRECTS, normalizer=NORMALIZER)
    assert got == expected


@pytest.mark.parametrize("max_redirects", [1, 2, 3])
def test_http_redirect_max_counts_the_hops_of_the_chain(max_redirects):
    def hop(chain):
        return classify_http(301, url=URL, location="https://example.com/next", retry_after=None, chain=chain,
                             now_s=NOW, max_redirects=max_redirects,
                             normalizer=NORMALIZER)

    allowed = [f"https://example.com/r{i}" for i in range(max_redirects - 1)]
    assert hop(allowed).status is Status.REDIRECTION
    assert hop(allowed + ["https://example.com/rx"]).reason is Reason.REDIRECT_TOO_MANY


FAILURE_CASES = [
    # the FetchError's reason, status (the outcome keeps the reason)
    (Reason.FETCH_TIMEOUT, S.FETCH_ERROR),
    (Reason.FETCH_DNS, S.FETCH_ERROR),
    (Reason.FETCH_CONNECTION, S.FETCH_ERROR),
    (Reason.FETCH_PROTOCOL, S.FETCH_ERROR),
    (Reason.FETCH_BLOCKED_ADDRESS, S.ERROR),
    (Reason.URL_MALFORMED, S.ERROR),
    (Reason.URL_SCHEME, S.ERROR),
    (Reason.URL_HOST, S.ERROR),
    (Reason.URL_USERINFO, S.ERROR),
    (Reason.URL_TOO_LONG, S.ERROR),
]


@pytest.mark.parametrize(("reason", "status"), FAILURE_CASES, ids=[c[0].value for c in FAILURE_CASES])
def test_classify_failure_follows_the_module_table(reason, status):
    assert classify_failure(reason) == Outcome(status, SignalKind.OTHER, reason)


def test_every_url_reason_is_a_permanent_failure_and_every_other_transport_one_but_the_guard_is_retried():
    for reason in Reason:
        if reason.category is ReasonCategory.URL or reason is Reason.FETCH_BLOCKED_ADDRESS:
            assert classify_failure(reason).status is S.ERROR, reason
        elif reason.category is ReasonCategory.TRANSPORT:
            assert classify_failure(reason).status is S.FETCH_ERROR, reason


def test_transport_failures_never_ask_for_a_parse_nor_carry_an_http_status():
    for reason, *_ in FAILURE_CASES:
        got = classify_failure(reason)
        assert (got.parse, got.http_status, got.retry_after_s) == (False, None, None)
