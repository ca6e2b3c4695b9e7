"""URL-shape trap guards: paths and queries that only a crawler trap produces (infinite URL spaces).

Pure functions over a canonical URL's path and query; :func:`squall.policy.scope.check`
calls :func:`check_path` and :func:`check_query` after the depth limit and
before the host cap. Each guard has its own :class:`squall.policy.reasons.Reason`,
counted per reason in ``squall status``:

* ``trap.repeated_segments``: one segment repeated back to back more than
  ``urlfilters.max.repeated.segments`` times (``/img/img/img/img``);
* ``trap.repeated_run``: a run of two or more segments, of any length,
  repeated back to back more than ``urlfilters.max.repeated.runs`` times
  (``/a/b/c/d/a/b/c/d/a/b/c/d``): the shape a relative link that keeps
  resolving against its own page gives (``href="a/b/c/d/"`` on ``/a/b/c/d/``);
* ``trap.host_segment``: one host-like segment (``shop.example``,
  ``www.example.com``) present more than ``urlfilters.max.host.segments``
  times anywhere in the path: the shape of an absolute link written without
  its scheme (``href="shop.example/x"``), resolved as a relative path at every hop;
* ``trap.repeated_query_param``: one query parameter name present more than
  ``urlfilters.max.query.param.copies`` times (``?p=1&p=1&p=1``).

Nutch's default regex URL filter refuses a segment repeated three times or
more (``-.*(/[^/]+)/[^/]+\\1/[^/]+\\1/``); these guards generalize it to
runs of any length and count copies exactly.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from squall.policy.reasons import Reason

if TYPE_CHECKING:
    from squall.settings import Settings

# A segment that reads as a DNS name: two or more LDH labels, the last alphabetic (a TLD-like label).
_HOST_LIKE = re.compile(r"(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}")
# Last labels that are file extensions far more often than top-level domains on a path segment
# (index.html, feed.xml, app.js). A few are also TLDs (.py, .pl, .md, .zip, .mov): such a segment
# is not treated as a host; its repeats are still caught by the run guards.
_FILE_EXTENSIONS = frozenset(
    [
        "html",
        "htm",
        "shtml",
        "xhtml",
        "php",
        "php3",
        "php5",
        "asp",
        "aspx",
        "jsp",
        "jspx",
        "cgi",
        "pl",
        "py",
        "rb",
        "do",
        "action",
        "xml",
        "json",
        "txt",
        "csv",
        "tsv",
        "pdf",
        "doc",
        "docx",
        "xls",
        "xlsx",
        "ppt",
        "pptx",
        "odt",
        "ods",
        "js",
        "mjs",
        "css",
        "map",
        "png",
        "jpg",
        "jpeg",
        "gif",
        "svg",
        "webp",
        "ico",
        "bmp",
        "tif",
        "tiff",
        "avif",
        "mp3",
        "mp4",
        "m4a",
        "avi",
        "mov",
        "webm",
        "ogg",
        "wav",
        "flac",
        "zip",
        "gz",
        "tgz",
        "bz2",
        "xz",
        "tar",
        "rar",
        "7z",
        "rss",
        "atom",
        "md",
        "rst",
        "ics",
        "vcf",
        "woff",
        "woff2",
        "ttf",
        "otf",
        "eot",
        "wasm",
        "exe",
        "dmg",
        "apk",
        "iso",
        "bin",
        "jar",
        "war",
        "epub",
        "mobi",
    ]
)


@dataclass(frozen=True)
class TrapConfig:
    """Copy limits of the URL-shape guards; ``-1`` means unlimited (the guard is off).

    ``max_segment_copies``: consecutive copies of one segment
    (``urlfilters.max.repeated.segments``, at least 1). ``max_run_copies``:
    consecutive copies of a run of 2+ segments (``urlfilters.max.repeated.runs``,
    -1 or at least 1). ``max_host_segments``: occurrences of one host-like
    segment in the path (``urlfilters.max.host.segments``, -1 or at least 1).
    ``max_query_param_copies``: occurrences of one query parameter name
    (``urlfilters.max.query.param.copies``, -1 or at least 1).
    """

    max_segment_copies: int
    max_run_copies: int
    max_host_segments: int
    max_query_param_copies: int

    @classmethod
    def from_settings(cls, settings: Settings) -> TrapConfig:
        """Copy the four ``urlfilters.*`` keys above (checked by :mod:`squall.settings.rules`)."""
        return cls(
            max_segment_copies=settings.urlfilters_max_repeated_segments,
            max_run_copies=settings.urlfilters_max_repeated_runs,
            max_host_segments=settings.urlfilters_max_host_segments,
            max_query_param_copies=settings.urlfilters_max_query_param_copies,
        )


def check_path(path: str, config: TrapConfig) -> Reason | None:
    """The trap reason of a canonical path (``/a/b``), or ``None``; checks in the module docstring's order."""
    segments = path.lstrip("/").split("/")
    if max_copies(segments, 1, 1) > config.max_segment_copies:
        return Reason.TRAP_REPEATED_SEGMENTS
    if config.max_run_copies != -1:
        # more than c copies of k segments need at least (c + 1) * k segments: longer runs cannot be over
        longest = len(segments) // (config.max_run_copies + 1)
        if max_copies(segments, 2, longest) > config.max_run_copies:
            return Reason.TRAP_REPEATED_RUN
    if config.max_host_segments != -1 and most_host_segment_copies(segments) > config.max_host_segments:
        return Reason.TRAP_HOST_SEGMENT
    return None


def check_query(query: str, config: TrapConfig) -> Reason | None:
    """``trap.repeated_query_param`` when one parameter name of ``query`` (no ``?``) is over the limit, else ``None``."""
    if config.max_query_param_copies == -1 or not query:
        return None
    names = Counter(unquote(pair.partition("=")[0].replace("+", " ")) for pair in query.split("&") if pair)
    if names and max(names.values()) > config.max_query_param_copies:
        return Reason.TRAP_REPEATED_QUERY_PARAM
    return None


def check_url(url: str, config: TrapConfig) -> Reason | None:
    """:func:`check_query`, then :func:`check_path`, of a canonical ``url``; ``None`` when both admit it."""
    parts = urlsplit(url)
    return check_query(parts.query, config) or check_path(parts.path, config)


def max_copies(segments: Sequence[str], shortest: int, longest: int) -> int:
    """Most consecutive copies of one primitive run of ``shortest`` to ``longest`` segments.

    ``["a", "b", "a", "b", "a", "b"]`` with runs of 2 → 3; a run that is
    itself a repetition (``a/a`` in ``/a/a/a/a``) is not counted, its
    shorter period is. 1 when nothing repeats. Time: O(n × runs looked at);
    a run of ``c`` copies of ``k`` segments is ``(c - 1) × k`` consecutive
    positions where segment ``i`` equals segment ``i + k``.
    """
    most = 1
    for k in range(shortest, longest + 1):
        run = 0
        for i in range(len(segments) - k):
            if segments[i] != segments[i + k]:
                run = 0
                continue
            run += 1
            copies = run // k + 1
            if copies > most and _primitive(segments[i - run + 1 : i - run + 1 + k]):
                most = copies
    return most


def _primitive(block: Sequence[str]) -> bool:
    """True when ``block`` is not a repetition of a shorter block (``a/b`` yes, ``a/a`` no)."""
    k = len(block)
    return not any(k % p == 0 and all(block[i] == block[i % p] for i in range(k)) for p in range(1, k // 2 + 1))


def is_host_like(segment: str) -> bool:
    """True for a path segment that reads as a host name (``shop.example``, ``WWW.Example.COM``).

    Two or more DNS labels, the last alphabetic and not a common file
    extension (``index.html`` and ``app.min.js`` are files, not hosts).
    """
    text = segment.lower().rstrip(".")
    if not _HOST_LIKE.fullmatch(text):
        return False
    return text.rsplit(".", 1)[1] not in _FILE_EXTENSIONS


def most_host_segment_copies(segments: Sequence[str]) -> int:
    """Most occurrences of one host-like segment (case-insensitive) anywhere in ``segments``; 0 if none."""
    found = [s for s in segments if is_host_like(s)]
    if len(found) < 2:  # most paths hold none: no counting
        return len(found)
    return max(Counter(s.lower().rstrip(".") for s in found).values())
