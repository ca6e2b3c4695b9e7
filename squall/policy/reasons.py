"""The status of a URL and the reason it ended where it did.

One enum for the status of a URL (StormCrawler's ``Status``) and one enum for
the reason a URL was rejected, failed, waits or ended in ERROR (instead of
free-text ``error.cause``), with the family each reason belongs to. Their
values are what travels in messages (:mod:`squall.policy.records`) and tables.
"""

from __future__ import annotations

from enum import Enum, StrEnum

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


class ReasonCategory(str, Enum):
    """The family of a :class:`Reason`: what kind of cause it names (``Reason.category``)."""

    INPUT = "input"  # a message that could not be decoded
    URL = "url"  # a URL that cannot be crawled: refused before any request
    SCOPE = "scope"  # outside the crawl's scope: a policy rejection
    TRAP = "trap"  # a crawler-trap guard: a policy rejection
    ROBOTS = "robots"  # robots.txt and Crawl-delay (RFC 9309, StormCrawler's CrawlDelayPolicy)
    REDIRECT = "redirect"  # a redirect that is not followed
    HTTP = "http"  # the host answered with an HTTP error
    TRANSPORT = "transport"  # no usable answer: timeout, DNS, connection, protocol, SSRF guard
    NOT_ATTEMPTED = "not_attempted"  # handed back to the frontier without a request
    SITEMAP = "sitemap"  # a sitemap, or one of its entries, that is not used


class Reason(StrEnum):
    """Why a URL was rejected, failed, waits or ended in ERROR (one code per cause).

    The value (``"robots.denied"``) is what travels in messages and tables;
    :attr:`category` says which family it belongs to (an explicit table, never
    read from the value's prefix). Unknown values are bad input:
    :meth:`parse` raises :class:`MessageError`. A ``StrEnum``: ``str()`` and
    f-strings give the value, as the plain strings did before (``squall url``
    prints ``invalid: url.host``, an exception's message starts with it).
    """

    category: ReasonCategory

    def __new__(cls, value: str, category: ReasonCategory) -> Reason:
        member = str.__new__(cls, value)
        member._value_ = value
        member.category = category
        return member

    # malformed input
    MESSAGE_INVALID = "message.invalid", ReasonCategory.INPUT
    URL_MALFORMED = "url.malformed", ReasonCategory.URL
    URL_SCHEME = "url.scheme", ReasonCategory.URL
    URL_HOST = "url.host", ReasonCategory.URL
    URL_USERINFO = "url.userinfo", ReasonCategory.URL
    URL_TOO_LONG = "url.too_long", ReasonCategory.URL
    # scope and trap guards (canonical URLs, scope, known URLs, redirect loops) — policy rejections, never fetch failures
    SCOPE_HOST = "scope.host", ReasonCategory.SCOPE
    SCOPE_REGEX = "scope.regex", ReasonCategory.SCOPE
    TRAP_DEPTH = "trap.depth", ReasonCategory.TRAP
    TRAP_HOST_CAP = "trap.host_cap", ReasonCategory.TRAP
    TRAP_QUERY_PARAMS = "trap.query_params", ReasonCategory.TRAP
    TRAP_REPEATED_SEGMENTS = "trap.repeated_segments", ReasonCategory.TRAP
    TRAP_REPEATED_RUN = "trap.repeated_run", ReasonCategory.TRAP
    TRAP_HOST_SEGMENT = "trap.host_segment", ReasonCategory.TRAP
    TRAP_REPEATED_QUERY_PARAM = "trap.repeated_query_param", ReasonCategory.TRAP
    # robots.txt (RFC 9309) and Crawl-delay (StormCrawler's CrawlDelayPolicy)
    ROBOTS_DENIED = "robots.denied", ReasonCategory.ROBOTS  # disallowed by the rules (ERROR); only that
    # robots.txt unreachable (5xx, 429, timeout, ...): complete disallow, so the URL is not attempted and
    # waits for the robots retry (DISCOVERED, RFC 9309 §2.3.1.4); never "denied"
    ROBOTS_UNAVAILABLE = "robots.unavailable", ReasonCategory.ROBOTS
    CRAWL_DELAY_TOO_LONG = "crawl_delay.too_long", ReasonCategory.ROBOTS
    # redirects
    REDIRECT_LOOP = "redirect.loop", ReasonCategory.REDIRECT
    REDIRECT_TOO_MANY = "redirect.too_many", ReasonCategory.REDIRECT
    # HTTP answers
    HTTP_NOT_FOUND = "http.not_found", ReasonCategory.HTTP
    HTTP_CLIENT_ERROR = "http.client_error", ReasonCategory.HTTP
    HTTP_SERVER_ERROR = "http.server_error", ReasonCategory.HTTP
    HTTP_RATE_LIMITED = "http.rate_limited", ReasonCategory.HTTP
    # max.rate.limits consecutive 429/503 answers
    HTTP_RATE_LIMITED_TOO_MANY = "http.rate_limited.too_many", ReasonCategory.HTTP
    # transport failures (transient: FETCH_ERROR, retried up to max.fetch.errors)
    FETCH_TIMEOUT = "fetch.timeout", ReasonCategory.TRANSPORT
    FETCH_DNS = "fetch.dns", ReasonCategory.TRANSPORT
    FETCH_CONNECTION = "fetch.connection", ReasonCategory.TRANSPORT
    FETCH_PROTOCOL = "fetch.protocol", ReasonCategory.TRANSPORT
    FETCH_BLOCKED_ADDRESS = "fetch.blocked_address", ReasonCategory.TRANSPORT
    FETCH_TOO_MANY_ERRORS = "fetch.too_many_errors", ReasonCategory.TRANSPORT
    # not attempted: handed back to the frontier (its host is blocked longer than the hand-out lead)
    FETCH_DEFERRED = "fetch.deferred", ReasonCategory.NOT_ATTEMPTED
    # not attempted: byIP, the host resolves to another address now; the URL moves to that queue
    FETCH_ADDRESS_CHANGED = "fetch.address_changed", ReasonCategory.NOT_ATTEMPTED
    # sitemaps (squall.policy.sitemaps): fetched, but not a usable sitemap
    SITEMAP_MALFORMED = "sitemap.malformed", ReasonCategory.SITEMAP
    SITEMAP_WRONG_TYPE = "sitemap.wrong_type", ReasonCategory.SITEMAP
    SITEMAP_TOO_BIG = "sitemap.too_big", ReasonCategory.SITEMAP
    # entries of a sitemap that do not enter (counted in parse.sitemap.dropped, shown by squall sitemap check)
    SITEMAP_DUPLICATE = "sitemap.duplicate", ReasonCategory.SITEMAP
    SITEMAP_TOO_OLD = "sitemap.too_old", ReasonCategory.SITEMAP
    SITEMAP_TOO_DEEP = "sitemap.too_deep", ReasonCategory.SITEMAP

    @property
    def is_robots(self) -> bool:
        """True for the robots.txt / Crawl-delay reasons (denied, unavailable, Crawl-delay too long)."""
        return self.category is ReasonCategory.ROBOTS

    @property
    def is_url(self) -> bool:
        """True for ``url.*``: the URL itself cannot be crawled (refused before any connection)."""
        return self.category is ReasonCategory.URL

    @property
    def not_attempted(self) -> bool:
        """True for a reason that hands a URL back without a request, to wait (a DISCOVERED result).

        ``robots.unavailable`` (robots.txt unreachable, RFC 9309 §2.3.1.4),
        ``fetch.deferred`` (host blocked beyond the hand-out lead) and
        ``fetch.address_changed`` (byIP: the host moved to another address).
        """
        return self in _NOT_ATTEMPTED

    @classmethod
    def of(cls, value: object) -> Reason:
        """The member whose value is ``value`` (what ``Reason(value)`` does, typed for the checker).

        Raises:
            ValueError: ``value`` is not the value of a member.
        """
        if isinstance(value, Reason):
            return value
        member = cls._value2member_map_.get(value) if isinstance(value, str) else None
        if not isinstance(member, Reason):
            raise ValueError(f"unknown reason {value!r}")
        return member

    @classmethod
    def parse(cls, value: object) -> Reason:
        """The member whose value is ``value``, for decoding a message.

        Raises:
            MessageError: ``value`` is not the value of a member (bad input).
        """
        try:
            return cls.of(value)
        except ValueError:
            raise MessageError(f"unknown reason {value!r}") from None


_NOT_ATTEMPTED = frozenset({Reason.ROBOTS_UNAVAILABLE, Reason.FETCH_DEFERRED, Reason.FETCH_ADDRESS_CHANGED})
