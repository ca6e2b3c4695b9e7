"""Scope and crawl-trap guards: which canonical URLs may enter the frontier (scope, depth, known URLs, traps).

A URL is admitted when its host is in scope, it passes the include/exclude
regular expressions, and none of the trap guards fires: depth from the seed,
URLs already known for its host, number of query
parameters, and the URL-shape guards of :mod:`squall.policy.traps` (repeated
segments and runs, repeated host-like segments, repeated query parameter
names: infinite URL spaces). Normalization is :mod:`squall.policy.urls`; redirect
loops are the fetcher's. Checks are pure: the caller supplies
the depth, whether the host was seeded and the host's URL count.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from squall.errors import InvalidURL
from squall.policy.memo import BoundedMemo
from squall.policy.partition import is_ip_literal, partition_for_key, partition_key
from squall.policy.reasons import Reason
from squall.policy.records import StatusMessage
from squall.policy.traps import TrapConfig, check_path, check_query
from squall.policy.url_parts import url_parts
from squall.policy.urls import idna_host

if TYPE_CHECKING:
    from squall.settings import Settings


@dataclass(frozen=True)
class ScopeConfig:
    """Scope and trap limits; ``-1`` means unlimited for depth, host cap and query parameters.

    ``hosts_allow`` are exact host names, ``domains_allow`` domains whose
    every host is in scope (both lower case, punycode, no trailing dot; both
    empty = the seeds' hosts only); ``schemes`` lower-case scheme names;
    ``include`` (empty = all) / ``exclude`` are searched anywhere in the URL;
    ``max_depth`` in hops from the seed; ``max_urls_per_host`` in URLs known
    for the host; ``max_query_params`` in ``&``-separated parameters;
    ``max_repeated_segments`` in consecutive copies of one path segment
    sequence.
    """

    hosts_allow: frozenset[str]
    domains_allow: frozenset[str]
    schemes: frozenset[str]
    include: tuple[re.Pattern[str], ...]
    exclude: tuple[re.Pattern[str], ...]
    max_depth: int
    max_urls_per_host: int
    max_query_params: int
    traps: TrapConfig

    @classmethod
    def from_settings(cls, settings: Settings) -> ScopeConfig:
        """Build from the ``urlfilters.*`` keys and ``frontier.max.urls.per.host`` (checked by
        :mod:`squall.settings.rules`: regular expressions compile, no public suffix, limits in range)."""
        return cls(
            hosts_allow=frozenset(host_name(h) for h in settings.urlfilters_hosts_allow),
            domains_allow=frozenset(host_name(d) for d in settings.urlfilters_domains_allow),
            schemes=frozenset(s.lower() for s in settings.urlfilters_schemes),
            include=tuple(re.compile(p) for p in settings.urlfilters_regex_include),
            exclude=tuple(re.compile(p) for p in settings.urlfilters_regex_exclude),
            max_depth=settings.urlfilters_max_depth,
            max_urls_per_host=settings.frontier_max_urls_per_host,
            max_query_params=settings.urlfilters_max_query_params,
            traps=TrapConfig.from_settings(settings),
        )


def host_name(name: Any) -> str:
    """A configured host or domain as canonical URLs spell it: lower case, punycode, no trailing dot."""
    text = str(name).strip().lower().rstrip(".")
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if not text.isascii():
        try:
            text = idna_host(text)  # IDNA 2008 / UTS 46, as canonical URLs spell hosts
        except InvalidURL:
            pass
    return text


def check(url: str, *, depth: int, host_seeded: bool, host_url_count: int, config: ScopeConfig) -> Reason | None:
    """Why a canonical ``url`` is refused, or ``None`` when it is admitted.

    ``depth`` is hops from the seed (0 for a seed); ``host_seeded`` says a
    seed had this host (the scope when both allow lists are empty);
    ``host_url_count`` is how many URLs of this host the frontier already
    holds. Checks run cheapest and most permanent first, the host cap last.

    Returns:
        ``URL_SCHEME`` / ``URL_HOST`` for a URL that is not canonical http(s)
        with a host; ``SCOPE_HOST``; ``SCOPE_REGEX``; ``TRAP_DEPTH`` when
        ``depth > max_depth``; ``TRAP_QUERY_PARAMS`` when the query has more
        than ``max_query_params`` parameters; ``TRAP_REPEATED_QUERY_PARAM``,
        ``TRAP_REPEATED_SEGMENTS``, ``TRAP_REPEATED_RUN``, ``TRAP_HOST_SEGMENT``
        (see :mod:`squall.policy.traps`); ``TRAP_HOST_CAP`` when ``host_url_count >=
        max_urls_per_host``. Never raises for a bad URL.
    """
    return _checked(_verdict(url, config), depth, host_seeded, host_url_count, config)


def check_link(url: str, *, depth: int, config: ScopeConfig) -> Reason | None:
    """The checks of :func:`check` that need nothing of the URL's host record, or ``None``.

    Scheme and host form, the host allow lists (``urlfilters.hosts.allow``,
    ``urlfilters.domains.allow``; the seeded-hosts scope needs the host's
    record), the include/exclude expressions, depth, query
    parameters and the URL-shape guards of :mod:`squall.policy.traps`: a URL they
    refuse is refused whatever its host, so the parse step applies them
    before sending an outlink (no out-of-scope link goes through Kafka).
    When :func:`check` would refuse a URL for its host first
    (``SCOPE_HOST``), this one may name another reason. Never raises for a
    bad URL.
    """
    before, after, _ = _verdict(url, config)
    return before or _depth(depth, config) or after


class LinkJudge:
    """:func:`check_link` and :func:`check` for one ``config``, with what does not depend on the depth memoized per URL.

    The parse step judges every link of every page, and most links are
    rediscoveries: the scheme, host form, expressions, query and URL-shape
    guards are computed once per URL (bounded by ``max_entries``, oldest
    first; thread-safe), the depth limit, the seeded-hosts scope and the
    host cap on each call.
    """

    def __init__(self, config: ScopeConfig, max_entries: int = 65536) -> None:
        self.config = config
        self._memo: BoundedMemo[str, tuple[Reason | None, Reason | None, str | None]] = BoundedMemo(max_entries)

    def _verdict(self, url: str) -> tuple[Reason | None, Reason | None, str | None]:
        verdict = self._memo.get(url)
        if verdict is None:
            verdict = _verdict(url, self.config)
            self._memo.put(url, verdict)
        return verdict

    def __call__(self, url: str, depth: int) -> Reason | None:
        """``check_link(url, depth=depth, config=self.config)``."""
        before, after, _ = self._verdict(url)
        return before or _depth(depth, self.config) or after

    def check(self, url: str, *, depth: int, host_seeded: bool, host_url_count: int) -> Reason | None:
        """``check(url, depth=..., host_seeded=..., host_url_count=..., config=self.config)``, from the memoized verdict."""
        return _checked(self._verdict(url), depth, host_seeded, host_url_count, self.config)


def batch_outlinks(
    links: Iterable[str],
    *,
    page_url: str,
    depth: int,
    metadata: dict[str, list[str]],
    canonical: Callable[[str], str],
    mode: str,
    partitions: int,
    judge: Callable[[str, int], Reason | None],
) -> list[StatusMessage]:
    """DISCOVERED messages for the outlinks of one page: one message per Kafka partition, not one per link.

    ``links``: absolute URLs as found, in document order; ``canonical``: the
    canonicalizer (:class:`squall.policy.urls.CanonicalCache`), raising
    :class:`InvalidURL` for a link that is not crawlable (such a link is
    dropped, as are repeats and ``page_url`` itself); ``depth``: the links'
    depth (the page's + 1); ``metadata``: what ``metadata.transfer`` passes
    on; ``mode``: ``partition.url.mode``; ``partitions``:
    ``topology.partitions`` (a link goes to :func:`partition_for_key` of its
    key, as every message keyed by it does); ``judge``: (URL, depth) → the
    reason :func:`check_link` gives (:class:`LinkJudge`).

    Each message carries, for one partition (in order of first appearance):
    the links ``judge`` admits, as ``url`` then ``more_urls``, and the count
    of the refused ones per key and reason in ``rejected``. A partition whose
    every link is refused still gets one message: its ``url`` is the first
    refused link, left out of ``rejected`` — the status updater checks it
    itself and counts it then, unless the URL is already known — so every
    refusal is counted on its host's record, with no message per refused link.
    """
    admitted: dict[int, list[str]] = {}
    refused: dict[int, list[tuple[str, str, Reason]]] = {}
    seen = {page_url}
    for link in links:
        try:
            url = canonical(link)
            key = partition_key(url, mode)
        except InvalidURL:
            continue  # mailto:, javascript:, malformed, too long: not crawlable links
        if url in seen:
            continue
        seen.add(url)
        partition = partition_for_key(key, partitions)
        urls = admitted.setdefault(partition, [])
        reason = judge(url, depth)
        if reason is None:
            urls.append(url)
        else:
            refused.setdefault(partition, []).append((url, key, reason))
    out: list[StatusMessage] = []
    for partition, urls in admitted.items():
        no = refused.get(partition, [])
        if not urls:
            urls, no = [no[0][0]], no[1:]
        counts: dict[str, dict[Reason, int]] = {}
        for _, key, reason in no:
            per_key = counts.setdefault(key, {})
            per_key[reason] = per_key.get(reason, 0) + 1
        out.append(StatusMessage(url=urls[0], depth=depth, metadata=metadata, more_urls=urls[1:], rejected=counts))
    return out


def _form(scheme: str, host: str | None, config: ScopeConfig) -> Reason | None:
    if scheme.lower() not in config.schemes:
        return Reason.URL_SCHEME
    if not host:
        return Reason.URL_HOST
    return None


def _verdict(url: str, config: ScopeConfig) -> tuple[Reason | None, Reason | None, str | None]:
    """check_link's depth-independent reasons, (before the depth limit, after it) in check's order, and the URL's host."""
    try:
        scheme, host, path, query = url_parts(url)
    except ValueError:
        return Reason.URL_HOST, None, None
    before = _form(scheme, host, config) or _host_by_name(host, config) or _regex(url, config)
    return before, None if before is not None else _shape(path, query, config), host


def _checked(
    verdict: tuple[Reason | None, Reason | None, str | None],
    depth: int,
    host_seeded: bool,
    host_url_count: int,
    config: ScopeConfig,
) -> Reason | None:
    """:func:`check`'s answer from a URL's :func:`_verdict`: its form, the host scope, the rest in order, the host cap.

    The verdict's first reason is the form's (``URL_SCHEME``, ``URL_HOST``),
    else the allow lists' (``SCOPE_HOST``, which the scope test here gives
    too), else the expressions'; the shape guards come after the depth limit.
    """
    before, after, host = verdict
    if before is Reason.URL_SCHEME or before is Reason.URL_HOST:
        return before
    assert host is not None  # a URL of a well-formed host (_form admitted it)
    if not _host_in_scope(host, host_seeded, config):
        return Reason.SCOPE_HOST
    reason = before or _depth(depth, config) or after
    if reason is None and config.max_urls_per_host != -1 and host_url_count >= config.max_urls_per_host:
        return Reason.TRAP_HOST_CAP
    return reason


def _regex(url: str, config: ScopeConfig) -> Reason | None:
    if config.include and not any(p.search(url) for p in config.include):
        return Reason.SCOPE_REGEX
    if any(p.search(url) for p in config.exclude):
        return Reason.SCOPE_REGEX
    return None


def _depth(depth: int, config: ScopeConfig) -> Reason | None:
    return Reason.TRAP_DEPTH if config.max_depth != -1 and depth > config.max_depth else None


def _shape(path: str, query: str, config: ScopeConfig) -> Reason | None:
    """The query-parameter count, then the URL-shape guards of :mod:`squall.policy.traps` (query, then path)."""
    if config.max_query_params != -1 and _query_params(query) > config.max_query_params:
        return Reason.TRAP_QUERY_PARAMS
    return check_query(query, config.traps) or check_path(path, config.traps)


def _host_by_name(host: str | None, config: ScopeConfig) -> Reason | None:
    """``SCOPE_HOST`` when allow lists name the scope and ``host`` is outside it; None without lists.

    Without allow lists the scope is "the seeds' hosts", which only the host's
    record knows: the status updater judges that (:func:`check`).
    """
    if host is None or (not config.hosts_allow and not config.domains_allow):
        return None
    return None if _host_in_scope(host, False, config) else Reason.SCOPE_HOST


def _host_in_scope(host: str, host_seeded: bool, config: ScopeConfig) -> bool:
    """Host allowed by name, by a domain above it, or (no allow lists) by having been seeded."""
    if not config.hosts_allow and not config.domains_allow:
        return host_seeded
    host = host.rstrip(".")
    if host in config.hosts_allow:
        return True
    if not config.domains_allow or is_ip_literal(host):
        return False
    labels = host.split(".")
    # "a.b.example.com" is below any of "a.b.example.com", "b.example.com", "example.com", "com"
    return any(".".join(labels[i:]) in config.domains_allow for i in range(len(labels)))


def _query_params(query: str) -> int:
    return sum(1 for pair in query.split("&") if pair)
