"""What a loopback test site serves: pages, robots.txt and hosts (:class:`SiteSpec`), and site factories.

A :class:`SiteSpec` maps each simulated host (one loopback address) to a
:class:`HostSpec`: its pages (:class:`Page`, or a :data:`PageHandler`
computed per request) and its :class:`RobotsSpec`. URLs inside a spec may
contain the placeholder ``{port}`` (:data:`PORT`), replaced by the real port
when served (:func:`url`). :mod:`squall.tools.testsite` serves a spec and
records what it received.
"""

from __future__ import annotations

import html
import json
import mimetypes
import random
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union
from urllib.parse import urljoin, urlsplit

from aiohttp import web
from protego import Protego

from squall.policy.parse import parse_html

PORT = "{port}"  # placeholder replaced by the server's port in links, locations, robots text, str bodies

PageHandler = Callable[[web.Request], Union["Page", web.StreamResponse, Awaitable[Union["Page", web.StreamResponse]]]]
"""A page computed per request: returns a :class:`Page` (served like a static one) or a ready response."""

_HTML = "text/html; charset=utf-8"


def url(ip: str, path: str = "/") -> str:
    """An absolute URL on a simulated host, with the ``{port}`` placeholder: ``url("127.0.0.3", "/a")``."""
    return f"http://{ip}:{PORT}{path}"


@dataclass(frozen=True)
class Page:
    """One page of a simulated host.

    ``body``: bytes served as they are, or str (encoded as UTF-8, ``{port}``
    replaced). ``links``: hrefs added to the body as ``<a href>`` (an empty
    body becomes a small HTML document with a title); ``nofollow_links`` the
    same with ``rel="nofollow"``. ``status``: the answer; ``statuses``: the
    answers to the first ``len(statuses)`` requests of this path, after which
    ``status`` is served (``statuses=(503, 503)`` = two 503s, then 200).
    ``headers``: extra response headers. ``retry_after``: a Retry-After value.
    ``location``: a redirect target (relative or absolute, ``{port}`` allowed;
    status defaults to 301 via :meth:`redirect`). ``gzip_bomb_mb``: serve a
    precomputed gzip of that many MiB of zeros with ``Content-Encoding: gzip``.
    ``calendar``: an infinite calendar — ``?d=YYYY-MM-DD`` links to the next
    and previous day. ``etag`` / ``last_modified``: validators; a matching
    If-None-Match (or, without one, an If-Modified-Since not older than
    ``last_modified``) gets 304 (RFC 9110 §13.2.2). ``delay_s``: seconds to
    wait before answering (the request is recorded on arrival).
    """

    body: bytes | str = b""
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    links: tuple[str, ...] = ()
    nofollow_links: tuple[str, ...] = ()
    title: str | None = None
    content_type: str = _HTML
    statuses: tuple[int, ...] = ()
    retry_after: str | None = None
    location: str | None = None
    gzip_bomb_mb: int = 0
    calendar: bool = False
    etag: str | None = None
    last_modified: str | None = None
    delay_s: float = 0.0

    @classmethod
    def redirect(cls, to: str, status: int = 301) -> Page:
        """A redirect to ``to`` (relative, or absolute with ``{port}``)."""
        return cls(status=status, location=to)

    def render(self, port: int) -> bytes:
        """The body as served on ``port`` (links added, placeholders replaced)."""
        body = self.body
        if isinstance(body, str):
            body = body.replace(PORT, str(port)).encode("utf-8")
        if not (self.links or self.nofollow_links) and (body or self.title is None):
            return body
        anchors = "".join(
            f'<li><a href="{html.escape(h.replace(PORT, str(port)))}">{html.escape(h)}</a></li>\n' for h in self.links
        )
        anchors += "".join(
            f'<li><a rel="nofollow" href="{html.escape(h.replace(PORT, str(port)))}">{html.escape(h)}</a></li>\n'
            for h in self.nofollow_links
        )
        block = f"<ul>\n{anchors}</ul>\n".encode()
        if not body:
            title = html.escape(self.title or "page")
            return (
                (
                    f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title></head>\n'
                    f"<body><h1>{title}</h1>\n"
                ).encode()
                + block
                + b"</body></html>\n"
            )
        idx = body.lower().rfind(b"</body>")
        return body + block if idx < 0 else body[:idx] + block + body[idx:]


@dataclass(frozen=True)
class RobotsSpec:
    """The robots.txt of a simulated host.

    ``statuses``: answers to the first requests (e.g. ``(503,) * 3``), then
    ``status`` with ``text`` (``{port}`` replaced). ``location``: redirect
    robots.txt there (``status`` 301 unless given), e.g. to another host's.
    ``delay_s``: wait before answering. ``etag``: sent with a 200; a request
    whose If-None-Match names it gets 304 Not Modified (RFC 9110 §13.1.2).
    """

    text: str = ""
    status: int = 200
    statuses: tuple[int, ...] = ()
    location: str | None = None
    delay_s: float = 0.0
    retry_after: str | None = None
    etag: str | None = None


@dataclass
class HostSpec:
    """Pages (path, optionally with ``?query``, → :class:`Page` or a :data:`PageHandler`) and robots.txt (None = 404)."""

    pages: dict[str, Page | PageHandler] = field(default_factory=dict)
    robots: RobotsSpec | None = None


@dataclass
class SiteSpec:
    """A simulated site: host IP (e.g. ``"127.0.0.2"``) → :class:`HostSpec`; seeds are each host's ``/``."""

    hosts: dict[str, HostSpec] = field(default_factory=dict)

    def seeds(self, port: int) -> list[str]:
        return [f"http://{ip}:{port}/" for ip in self.hosts]

    def replay(self, port: int, agent: str = "squall") -> tuple[set[str], set[str]]:
        """(expected, disallowed) URLs for a correct crawler with robots agent ``agent``; see module doc."""
        robots = {ip: _robots_rules(self, ip, port) for ip in self.hosts}
        expected: set[str] = set()
        disallowed: set[str] = set()
        for ip, host in self.hosts.items():
            for path in host.pages:
                u = f"http://{ip}:{port}{path}"
                if not _allowed(robots[ip], u, agent):
                    disallowed.add(u)
        queue = deque(self.seeds(port))
        seen = set(queue)
        while queue:
            u = queue.popleft()
            parts = urlsplit(u)
            ip = parts.hostname or ""
            if ip not in self.hosts or parts.port != port or parts.scheme != "http":
                continue  # out of scope: not one of the simulated hosts
            if not _allowed(robots[ip], u, agent):
                disallowed.add(u)
                continue
            expected.add(u)
            for link in _page_links(self.hosts[ip], u, port):
                if link not in seen:
                    seen.add(link)
                    queue.append(link)
        return expected, disallowed


# ---------------------------------------------------------------------- factories


def generated_site(
    hosts: list[str],
    pages_per_host: int,
    *,
    disallow: str | None = "/private/",
    cross_links: bool = True,
    seed: int = 0,
) -> SiteSpec:
    """An interlinked site over ``hosts`` (loopback IPs), deterministic for a ``seed``.

    Per host: ``/`` links to ``/page/0`` … ``/page/<n-1>`` (so every public
    page is reachable from the index), each page links to up to three pages
    of its host and (``cross_links``) one page of another host; with
    ``disallow``, robots.txt disallows that prefix for every agent and two
    pages under it are linked from the index and from pages (a crawler that
    ignores robots requests them); ``/nofollow-target`` is linked only with
    ``rel=nofollow``; ``/meta-nofollow`` carries ``<meta name=robots
    content=nofollow>`` and is the only page linking to ``/meta-target``.
    Without ``disallow`` robots.txt allows everything.
    """
    rng = random.Random(seed)
    spec = SiteSpec()
    n = max(0, pages_per_host)
    prefix = "/" + disallow.strip("/") + "/" if disallow else None
    for i, ip in enumerate(hosts):
        others = [h for h in hosts if h != ip]
        private = [f"{prefix}secret-{k}" for k in range(2)] if prefix else []
        pages: dict[str, Page | PageHandler] = {}
        index_links = [f"/page/{k}" for k in range(n)] + private + ["/meta-nofollow"]
        pages["/"] = Page(title=f"host {i} index", links=tuple(index_links), nofollow_links=("/nofollow-target",))
        for k in range(n):
            local = rng.sample(range(n), min(3, n))
            links = [f"/page/{j}" for j in local if j != k]
            if private and rng.random() < 0.3:
                links.append(rng.choice(private))
            if cross_links and others and n:
                links.append(url(rng.choice(others), f"/page/{rng.randrange(n)}"))
            pages[f"/page/{k}"] = Page(title=f"host {i} page {k}", links=tuple(links))
        for p in private:
            pages[p] = Page(title=f"host {i} private {p}", links=("/private-only-child",))
        pages["/nofollow-target"] = Page(title=f"host {i} nofollow target")
        pages["/meta-nofollow"] = Page(
            body=(
                f'<!DOCTYPE html><html><head><meta name="robots" content="nofollow">'
                f"<title>host {i} meta nofollow</title></head><body>"
                f'<a href="/meta-target">only here</a></body></html>'
            )
        )
        pages["/meta-target"] = Page(title=f"host {i} meta target")
        robots = (
            RobotsSpec(text=f"User-agent: *\nDisallow: {prefix}\n")
            if prefix
            else RobotsSpec(text="User-agent: *\nAllow: /\n")
        )
        spec.hosts[ip] = HostSpec(pages=pages, robots=robots)
    return spec


# The script of spa_host's pages: fetches /api<path>.json (a JSON list of hrefs) and adds them as <a> links.
SPA_APP_JS = """(function () {
  var path = location.pathname === "/" ? "/index" : location.pathname;
  fetch("/api" + path + ".json").then(function (r) { return r.json(); }).then(function (hrefs) {
    var root = document.getElementById("root");
    var list = document.createElement("ul");
    hrefs.forEach(function (h) {
      var li = document.createElement("li"), a = document.createElement("a");
      a.href = h; a.textContent = h; li.appendChild(a); list.appendChild(li);
    });
    root.appendChild(list);
  });
})();
"""


def spa_shell(title: str, script: str = "") -> Page:
    """An application shell: an empty ``#root``, ``/app.js`` and an optional inline ``script`` ({port} allowed)."""
    inline = f"<script>{script}</script>" if script else ""
    return Page(
        body=(
            f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title></head>'
            f'<body><div id="root"></div><script src="/app.js"></script>{inline}</body></html>'
        )
    )


def spa_host(
    links: dict[str, list[str]],
    *,
    scripts: dict[str, str] | None = None,
    robots: RobotsSpec | None = None,
    extra: dict[str, Page | PageHandler] | None = None,
) -> HostSpec:
    """A single-page application: each path of ``links`` is a :func:`spa_shell` whose links exist only
    after ``/app.js`` ran (it fetches them from ``/api<path>.json``; ``/`` uses ``/api/index.json``).

    ``scripts``: path → inline script added to that page. ``extra``: more
    pages (e.g. what a script fetches). A crawler that does not run scripts
    finds no link on any page.
    """
    pages: dict[str, Page | PageHandler] = {"/app.js": Page(body=SPA_APP_JS, content_type="application/javascript")}
    for path, hrefs in links.items():
        pages[path] = spa_shell(f"spa {path}", (scripts or {}).get(path, ""))
        api = "/api" + ("/index" if path == "/" else path) + ".json"
        pages[api] = Page(body=json.dumps(hrefs), content_type="application/json")
    pages.update(extra or {})
    return HostSpec(pages=pages, robots=robots or RobotsSpec(text="User-agent: *\nAllow: /\n"))


def directory_site(root: Path, host: str) -> SiteSpec:
    """A host serving the files under ``root``: ``index.html`` for directories, types from file names.

    ``/dir`` redirects (301) to ``/dir/`` when the directory has an
    ``index.html``; ``robots.txt`` in ``root`` is the robots file, else 404.
    Files are read once, now.
    """
    root = Path(root)
    pages: dict[str, Page | PageHandler] = {}
    robots: RobotsSpec | None = None
    for f in sorted(root.rglob("*")):
        if not f.is_file():
            continue
        rel = "/" + f.relative_to(root).as_posix()
        if rel == "/robots.txt":
            robots = RobotsSpec(text=f.read_text("utf-8", "replace"))
            continue
        ctype, encoding = mimetypes.guess_type(f.name)
        ctype = ctype or "application/octet-stream"
        if ctype.startswith("text/") or ctype in ("application/xhtml+xml", "application/javascript"):
            ctype += "; charset=utf-8" if _is_utf8(f) else ""
        headers = (("Content-Encoding", encoding),) if encoding == "gzip" else ()
        page = Page(body=f.read_bytes(), content_type=ctype, headers=headers)
        pages[rel] = page
        if f.name == "index.html":
            parent = rel[: -len("index.html")]
            pages[parent] = page
            if parent != "/":
                pages[parent.rstrip("/")] = Page.redirect(parent)
    return SiteSpec(hosts={host: HostSpec(pages=pages, robots=robots)})


def _is_utf8(f: Path) -> bool:
    try:
        f.read_bytes().decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


# ---------------------------------------------------------------------- replay helpers


def _robots_rules(spec: SiteSpec, ip: str, port: int, hops: int = 0) -> Protego | bool:
    """Steady-state robots rules of host ``ip``: a parser, True (allow all) or False (disallow all).

    RFC 9309 §2.3.1: 4xx → allow all, 5xx/unreachable → disallow all,
    redirects followed up to five hops (to hosts outside the spec: allow all).
    """
    robots = spec.hosts[ip].robots
    if robots is None:
        return True
    status = robots.status
    if robots.location and (status == 200 or 300 <= status < 400):
        target = urlsplit(urljoin(f"http://{ip}:{port}/robots.txt", robots.location.replace(PORT, str(port))))
        if hops >= 5 or target.hostname not in spec.hosts or target.port != port:
            return True
        return _robots_rules(spec, target.hostname, port, hops + 1)
    if 200 <= status < 300:
        return Protego.parse(robots.text.replace(PORT, str(port)))
    return 400 <= status < 500


def _allowed(rules: Protego | bool, u: str, agent: str) -> bool:
    if isinstance(rules, bool):
        return rules
    return rules.can_fetch(u, agent)


def _page_links(host: HostSpec, u: str, port: int) -> list[str]:
    """Absolute URLs a crawler finds by fetching ``u`` (outlinks, or a redirect target); none for traps."""
    parts = urlsplit(u)
    path = parts.path + ("?" + parts.query if parts.query else "")
    page = host.pages.get(path) or host.pages.get(parts.path)
    if page is None or callable(page) or page.calendar or page.gzip_bomb_mb:
        return []
    if page.location is not None and (page.status == 200 or 300 <= page.status < 400):
        return [urljoin(u, page.location.replace(PORT, str(port)))]
    if page.status != 200:
        return []
    headers = [("Content-Type", page.content_type), *page.headers]
    result = parse_html(page.render(port), url=u, headers=headers, content_type=page.content_type)
    return [link.split("#", 1)[0] for link in result.outlinks]
