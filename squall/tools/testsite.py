"""A real, recording HTTP server of simulated hosts on loopback addresses, for tests and the demo.

Each simulated host is one loopback address (``127.0.0.2``, ``127.0.0.3``, ...)
and all of them listen on the same port, so ``http://127.0.0.2:PORT/`` and
``http://127.0.0.3:PORT/`` are different hosts to a crawler. The site is
described by a :class:`SiteSpec` (hosts → :class:`HostSpec`: pages and a
:class:`RobotsSpec`); :class:`RecordingServer` serves it with aiohttp and
records every request, when it *arrived*, in memory and as JSON lines::

    {"host": "127.0.0.2:PORT", "ip": "127.0.0.2", "path": "/a?x", "method": "GET",
     "t": 1700000000.123, "ua": "squall/0.1", "status": 200}

plus ``"retry_after": "2"`` when the answer carried a Retry-After header.

``ip`` is the local address the request came in on (the simulated host);
``host`` is the Host header as sent; ``status`` is None while the answer is
pending (in memory) and for a request whose client went away.

URLs inside a spec (links, redirect targets, robots text, ``str`` bodies) may
contain the placeholder ``{port}``; it is replaced by the real port when
served, so a spec can be written before the port is known (:func:`url`).

:meth:`RecordingServer.expected_pages` replays the site as a correct crawler
would (links parsed with :func:`squall.policy.parse.parse_html`, robots.txt with
Protego for the given agent, RFC 9309 §2.3.1 status handling) and returns the
URLs such a crawler must fetch; :meth:`RecordingServer.disallowed_pages` the
ones it must not.

Command line (the demo uses it)::

    python -m squall.tools.testsite --hosts 127.0.0.2,127.0.0.3 --pages 20 --port 0 --log FILE [--dir DIR]

prints ``{"port": ..., "seeds": [...], "log": ..., "expected": [...], "disallowed": [...]}``
on one line, then serves until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import html
import inspect
import json
import mimetypes
import random
import signal
import sys
import time
import zlib
import threading
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from email.utils import parsedate_to_datetime
from functools import lru_cache
from pathlib import Path
from typing import IO, Any, Union
from urllib.parse import urljoin, urlsplit

from aiohttp import web
from protego import Protego

from squall.policy.parse import parse_html

__all__ = [
    "Page", "RobotsSpec", "HostSpec", "SiteSpec", "RecordingServer", "PageHandler",
    "generated_site", "directory_site", "spa_host", "spa_shell", "SPA_APP_JS", "url", "PORT", "ThreadedSite",
]

PORT = "{port}"  # placeholder replaced by the server's port in links, locations, robots text, str bodies

PageHandler = Callable[[web.Request], Union["Page", web.StreamResponse, Awaitable[Union["Page", web.StreamResponse]]]]
"""A page computed per request: returns a :class:`Page` (served like a static one) or a ready response."""

_HTML = "text/html; charset=utf-8"
_CAL_DEFAULT = date(2020, 1, 1)


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
    def redirect(cls, to: str, status: int = 301) -> "Page":
        """A redirect to ``to`` (relative, or absolute with ``{port}``)."""
        return cls(status=status, location=to)

    def render(self, port: int) -> bytes:
        """The body as served on ``port`` (links added, placeholders replaced)."""
        body = self.body
        if isinstance(body, str):
            body = body.replace(PORT, str(port)).encode("utf-8")
        if not (self.links or self.nofollow_links) and (body or self.title is None):
            return body
        anchors = "".join(f'<li><a href="{html.escape(h.replace(PORT, str(port)))}">{html.escape(h)}</a></li>\n'
                          for h in self.links)
        anchors += "".join(f'<li><a rel="nofollow" href="{html.escape(h.replace(PORT, str(port)))}">'
                           f"{html.escape(h)}</a></li>\n" for h in self.nofollow_links)
        block = f"<ul>\n{anchors}</ul>\n".encode()
        if not body:
            title = html.escape(self.title or "page")
            return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title></head>\n"
                    f"<body><h1>{title}</h1>\n").encode() + block + b"</body></html>\n"
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

def generated_site(hosts: list[str], pages_per_host: int, *, disallow: str | None = "/private/",
                   cross_links: bool = True, seed: int = 0) -> SiteSpec:
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
        pages["/"] = Page(title=f"host {i} index", links=tuple(index_links),
                          nofollow_links=("/nofollow-target",))
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
            body=(f'<!DOCTYPE html><html><head><meta name="robots" content="nofollow">'
                  f"<title>host {i} meta nofollow</title></head><body>"
                  f'<a href="/meta-target">only here</a></body></html>'))
        pages["/meta-target"] = Page(title=f"host {i} meta target")
        robots = (RobotsSpec(text=f"User-agent: *\nDisallow: {prefix}\n") if prefix
                  else RobotsSpec(text="User-agent: *\nAllow: /\n"))
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
    return Page(body=(f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title></head>'
                      f'<body><div id="root"></div><script src="/app.js"></script>{inline}</body></html>'))


def spa_host(links: dict[str, list[str]], *, scripts: dict[str, str] | None = None,
             robots: RobotsSpec | None = None, extra: dict[str, Page | PageHandler] | None = None) -> HostSpec:
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


# ---------------------------------------------------------------------- server

class RecordingServer:
    """Serves a :class:`SiteSpec` on its hosts' loopback addresses, one port, recording every request.

    ``port=0`` picks a port free on every address. ``log_path``: also append
    each request as a JSON line there (written when answered, ``t`` = arrival).
    Use as ``async with RecordingServer(spec) as server:``.
    """

    def __init__(self, spec: SiteSpec, port: int = 0, log_path: Path | str | None = None) -> None:
        if not spec.hosts:
            raise ValueError("SiteSpec has no hosts")
        self.spec = spec
        self._want_port = port
        self._port: int | None = None
        self.log_path = Path(log_path) if log_path else None
        self._log: IO[str] | None = None
        self._requests: list[dict[str, Any]] = []
        self._hits: dict[tuple[str, str], int] = {}
        self._runner: web.AppRunner | None = None

    # ---------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> "RecordingServer":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Bind every host address on one port and start serving.

        Raises:
            OSError: the port (or, with port 0, any common free port after 20 tries) could not be bound.
        """
        if self.log_path:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = open(self.log_path, "a", encoding="utf-8")
        ips = list(self.spec.hosts)
        last: OSError | None = None
        for _ in range(20 if self._want_port == 0 else 1):
            app = web.Application(middlewares=[self._record])
            app.router.add_route("*", "/{tail:.*}", self._handle)
            runner = web.AppRunner(app, access_log=None, handle_signals=False)
            await runner.setup()
            try:
                first = web.TCPSite(runner, ips[0], self._want_port)
                await first.start()
                port = runner.addresses[0][1]
                for ip in ips[1:]:
                    await web.TCPSite(runner, ip, port).start()
            except OSError as exc:  # port taken on one of the addresses: try another
                last = exc
                await runner.cleanup()
                continue
            self._runner, self._port = runner, port
            return
        if self._log:
            self._log.close()
        raise last or OSError("could not bind")

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._log is not None:
            self._log.close()
            self._log = None

    # ---------------------------------------------------------------- queries

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("server not started")
        return self._port

    def base_url(self, host_ip: str) -> str:
        """``http://<host_ip>:<port>`` (no trailing slash)."""
        return f"http://{host_ip}:{self.port}"

    @property
    def seeds(self) -> list[str]:
        return self.spec.seeds(self.port)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request so far, in arrival order (a copy)."""
        return [dict(r) for r in self._requests]

    def requests_for(self, ip: str) -> list[dict[str, Any]]:
        """Requests that arrived on simulated host ``ip``, in arrival order."""
        return [dict(r) for r in self._requests if r["ip"] == ip]

    def expected_pages(self, agent: str = "squall") -> set[str]:
        """URLs a correct crawler (robots agent ``agent``) must fetch: reachable, allowed, not only behind nofollow."""
        return self.spec.replay(self.port, agent)[0]

    def disallowed_pages(self, agent: str = "squall") -> set[str]:
        """URLs robots.txt forbids to ``agent``: every such page of the spec and every such linked URL."""
        return self.spec.replay(self.port, agent)[1]

    # ---------------------------------------------------------------- serving

    @web.middleware
    async def _record(self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                      ) -> web.StreamResponse:
        sock = request.transport.get_extra_info("sockname") if request.transport else None
        entry: dict[str, Any] = {
            "host": request.host, "ip": sock[0] if sock else "", "path": request.raw_path,
            "method": request.method, "t": time.time(), "ua": request.headers.get("User-Agent", ""),
            "status": None, "if_none_match": request.headers.get("If-None-Match"),
        }
        self._requests.append(entry)
        try:
            response = await handler(request)
            entry["status"] = response.status
            if "Retry-After" in response.headers:
                entry["retry_after"] = response.headers["Retry-After"]
            return response
        except web.HTTPException as exc:
            entry["status"] = exc.status
            raise
        finally:
            if self._log is not None:
                self._log.write(json.dumps(entry, separators=(",", ":")) + "\n")
                self._log.flush()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        sock = request.transport.get_extra_info("sockname") if request.transport else None
        ip = sock[0] if sock else ""
        host = self.spec.hosts.get(ip)
        if host is None:
            return web.Response(status=421, text="misdirected request\n")
        if request.path == "/robots.txt":
            return await self._robots(ip, host.robots, request)
        page = host.pages.get(request.raw_path)
        if page is None:
            page = host.pages.get(request.path)
        if page is None:
            return web.Response(status=404, text="not found\n")
        if callable(page):
            result = page(request)
            if inspect.isawaitable(result):
                result = await result
            if isinstance(result, web.StreamResponse):
                return result
            page = result
        return await self._serve(ip, request, page)

    def _count(self, ip: str, key: str) -> int:
        n = self._hits.get((ip, key), 0)
        self._hits[(ip, key)] = n + 1
        return n

    async def _robots(self, ip: str, robots: RobotsSpec | None, request: web.Request) -> web.StreamResponse:
        if robots is None:
            return web.Response(status=404, text="no robots.txt\n")
        n = self._count(ip, "/robots.txt")
        if robots.delay_s > 0:
            await asyncio.sleep(robots.delay_s)
        status = robots.statuses[n] if n < len(robots.statuses) else robots.status
        headers = {"Retry-After": robots.retry_after} if robots.retry_after else {}
        if robots.location and status == 200 and n >= len(robots.statuses):
            status = 301
        if robots.location and 300 <= status < 400:
            headers["Location"] = robots.location.replace(PORT, str(self.port))
            return web.Response(status=status, headers=headers)
        if status == 200 and robots.etag:
            headers["ETag"] = robots.etag
            if robots.etag in {t.strip() for t in request.headers.get("If-None-Match", "").split(",")}:
                return web.Response(status=304, headers=headers)
        text = robots.text.replace(PORT, str(self.port)) if status == 200 else f"status {status}\n"
        return web.Response(status=status, text=text, headers=headers)

    async def _serve(self, ip: str, request: web.Request, page: Page) -> web.StreamResponse:
        n = self._count(ip, request.raw_path)
        if page.delay_s > 0:
            await asyncio.sleep(page.delay_s)
        status = page.statuses[n] if n < len(page.statuses) else page.status
        headers: dict[str, str] = {}
        if page.retry_after is not None:
            headers["Retry-After"] = page.retry_after
        if page.location is not None:
            if status == 200 and n >= len(page.statuses):
                status = 301
            if 300 <= status < 400:
                headers["Location"] = page.location.replace(PORT, str(self.port))
                return web.Response(status=status, headers=headers)
        if status != 200:
            return web.Response(status=status, text=f"status {status}\n", headers=headers)
        if page.etag:
            headers["ETag"] = page.etag
        if page.last_modified:
            headers["Last-Modified"] = page.last_modified
        if _not_modified(request, page):
            return web.Response(status=304, headers=headers)
        if page.gzip_bomb_mb > 0:
            headers.update({"Content-Encoding": "gzip", "Content-Type": page.content_type})
            return web.Response(body=_gzip_zeros(page.gzip_bomb_mb), headers=headers)
        if page.calendar:
            body = _calendar(request)
            if body is None:
                return web.Response(status=404, text="bad date\n")
        else:
            body = page.render(self.port)
        headers["Content-Type"] = page.content_type
        for k, v in page.headers:
            headers[k] = v.replace(PORT, str(self.port))
        if request.method == "HEAD":
            return web.Response(headers=headers)
        return web.Response(body=body, headers=headers)



class ThreadedSite:
    """A :class:`RecordingServer` on its own event loop in a daemon thread (tests drive it synchronously).

    ``server`` exposes the requests and the expectations; :meth:`close` stops it.
    """

    def __init__(self, spec: SiteSpec, log_path: Path) -> None:
        self.server = RecordingServer(spec, log_path=log_path)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(30)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def seeds(self) -> list[str]:
        return self.server.seeds

    def url(self, ip: str, path: str = "/") -> str:
        return f"{self.server.base_url(ip)}{path}"

    def requests(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self.server.requests]

    def page_requests(self) -> Counter[str]:
        """How many times each URL (robots.txt excluded) was requested."""
        port = self.server.port
        return Counter(f"http://{r['ip']}:{port}{r['path']}" for r in self.requests()
                                   if r["path"] != "/robots.txt")

    def start_times(self, ip: str) -> list[float]:
        """Arrival times of every request to host ``ip`` (robots.txt included), sorted."""
        return sorted(r["t"] for r in self.server.requests_for(ip))

    def min_gap(self, ip: str) -> float:
        times = self.start_times(ip)
        return min((b - a for a, b in zip(times, times[1:])), default=float("inf"))


def _not_modified(request: web.Request, page: Page) -> bool:
    """RFC 9110 §13.2.2: If-None-Match wins over If-Modified-Since; weak comparison for GET/HEAD."""
    inm = request.headers.get("If-None-Match")
    if inm is not None:
        if not page.etag:
            return False
        tags = {t.strip().removeprefix("W/") for t in inm.split(",")}
        return "*" in tags or page.etag.removeprefix("W/") in tags
    ims = request.headers.get("If-Modified-Since")
    if ims and page.last_modified:
        try:
            return parsedate_to_datetime(page.last_modified) <= parsedate_to_datetime(ims)
        except (TypeError, ValueError):
            return False
    return False


@lru_cache(maxsize=8)
def _gzip_zeros(mib: int) -> bytes:
    """gzip of ``mib`` MiB of zero bytes (about 1/1000 of the size), computed once per size."""
    chunk = b"\0" * (1 << 20)
    comp = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)  # | 16: gzip framing
    return b"".join(comp.compress(chunk) for _ in range(mib)) + comp.flush()


def _calendar(request: web.Request) -> bytes | None:
    """One day of the infinite calendar: links to the previous and next day (a crawler trap)."""
    raw = request.query.get("d")
    try:
        day = date.fromisoformat(raw) if raw else _CAL_DEFAULT
    except ValueError:
        return None
    path = request.path
    prev_day, next_day = day - timedelta(days=1), day + timedelta(days=1)
    return (f"<!DOCTYPE html><html><head><title>Calendar {day.isoformat()}</title></head><body>"
            f"<h1>{day.isoformat()}</h1>"
            f'<a href="{path}?d={prev_day.isoformat()}">previous</a> '
            f'<a href="{path}?d={next_day.isoformat()}">next</a></body></html>').encode()


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
    if 400 <= status < 500:
        return True
    return False


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


# ---------------------------------------------------------------------- CLI

def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m squall.tools.testsite", description=__doc__.split("\n")[0])
    p.add_argument("--hosts", default="127.0.0.2,127.0.0.3", help="comma-separated loopback IPs")
    p.add_argument("--pages", type=int, default=20, help="pages per host (generated site)")
    p.add_argument("--port", type=int, default=0, help="port for every host; 0 = a free one")
    p.add_argument("--log", default=None, help="JSON-lines request log file")
    p.add_argument("--dir", default=None, help="serve this directory on every host instead of a generated site")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated site")
    p.add_argument("--disallow", default="/private/", help="robots-disallowed prefix; '' = none")
    p.add_argument("--agent", default="squall", help="robots agent for the expected/disallowed lists")
    return p.parse_args(argv)


async def _serve_forever(args: argparse.Namespace) -> None:
    hosts = [h.strip() for h in args.hosts.split(",") if h.strip()]
    if args.dir:
        spec = SiteSpec()
        for h in hosts:
            spec.hosts.update(directory_site(Path(args.dir), h).hosts)
    else:
        spec = generated_site(hosts, args.pages, disallow=args.disallow or None, seed=args.seed)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with RecordingServer(spec, port=args.port, log_path=args.log) as server:
        expected, disallowed = spec.replay(server.port, args.agent)
        print(json.dumps({"port": server.port, "seeds": server.seeds, "log": args.log,
                          "expected": sorted(expected), "disallowed": sorted(disallowed)}), flush=True)
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    asyncio.run(_serve_forever(_parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
