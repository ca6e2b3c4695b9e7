"""The parts of a URL in plain canonical spelling, read off by one match instead of ``urlsplit``.

Most URLs a crawl handles are canonical URLs of LDH hosts
(:func:`squall.policy.urls.canonicalize` makes them); :data:`PLAIN_URL_RE`
recognizes that spelling, and :func:`url_parts` reads such a URL's parts
without ``urllib.parse.urlsplit``, giving exactly what ``urlsplit`` would.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

# A URL already in canonical spelling but for its query's parameters and a fragment (see urls._plain_canonical):
# a lower-case scheme and host of LDH labels, no userinfo, a port without leading zero, and path and query
# of characters RFC 3986 §3.3-3.4 allows as they are (no "%", no quote, no space) without a dot segment
PLAIN_URL_RE = re.compile(
    r"(?P<scheme>[a-z][a-z0-9+.\-]*)://(?P<host>[a-z0-9_\-]{1,63}(?:\.[a-z0-9_\-]{1,63})*)"
    r"(?::(?P<port>[1-9][0-9]{0,4}))?(?P<path>/[A-Za-z0-9\-._~!$&()*+,;=:@/]*)?"
    r"(?:\?(?P<query>[A-Za-z0-9\-._~!$&()*+,;=:@/?]*))?(?:#[A-Za-z0-9\-._~!$&()*+,;=:@/?#]*)?"
)


def url_parts(url: str) -> tuple[str, str | None, str, str]:
    """(scheme, hostname, path, query) of ``url``, as ``urllib.parse.urlsplit`` gives them.

    A URL that :data:`PLAIN_URL_RE` matches whole is read off by that match;
    any other goes through ``urlsplit``.

    Raises:
        ValueError: as ``urlsplit`` does (e.g. an invalid IPv6 literal).
    """
    plain = PLAIN_URL_RE.fullmatch(url)
    if plain is not None:
        return plain["scheme"], plain["host"], plain["path"] or "", plain["query"] or ""
    parts = urlsplit(url)
    return parts.scheme, parts.hostname, parts.path, parts.query
