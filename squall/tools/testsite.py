"""A real, recording HTTP server of simulated hosts on loopback addresses, for tests and the demo.

What it serves is a :class:`~squall.tools.site_spec.SiteSpec` (:mod:`squall.tools.site_spec`).

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
import inspect
import itertools
import json
import signal
import sys
import threading
import time
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import date, timedelta
from email.utils import parsedate_to_datetime
from functools import lru_cache
from pathlib import Path
from typing import IO, Any

from aiohttp import web

from squall.tools.site_spec import PORT, Page, RobotsSpec, SiteSpec, directory_site, generated_site

__all__ = ["RecordingServer", "ThreadedSite"]

_CAL_DEFAULT = date(2020, 1, 1)


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

    async def __aenter__(self) -> RecordingServer:
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
            self._log = open(self.log_path, "a", encoding="utf-8")  # noqa: ASYNC230, SIM115  # kept open while serving
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
    async def _record(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        sock = request.transport.get_extra_info("sockname") if request.transport else None
        entry: dict[str, Any] = {
            "host": request.host,
            "ip": sock[0] if sock else "",
            "path": request.raw_path,
            "method": request.method,
            "t": time.time(),
            "ua": request.headers.get("User-Agent", ""),
            "status": None,
            "if_none_match": request.headers.get("If-None-Match"),
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
        return Counter(f"http://{r['ip']}:{port}{r['path']}" for r in self.requests() if r["path"] != "/robots.txt")

    def start_times(self, ip: str) -> list[float]:
        """Arrival times of every request to host ``ip`` (robots.txt included), sorted."""
        return sorted(r["t"] for r in self.server.requests_for(ip))

    def min_gap(self, ip: str) -> float:
        times = self.start_times(ip)
        return min((b - a for a, b in itertools.pairwise(times)), default=float("inf"))


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
    return (
        f"<!DOCTYPE html><html><head><title>Calendar {day.isoformat()}</title></head><body>"
        f"<h1>{day.isoformat()}</h1>"
        f'<a href="{path}?d={prev_day.isoformat()}">previous</a> '
        f'<a href="{path}?d={next_day.isoformat()}">next</a></body></html>'
    ).encode()


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
        print(
            json.dumps(
                {
                    "port": server.port,
                    "seeds": server.seeds,
                    "log": args.log,
                    "expected": sorted(expected),
                    "disallowed": sorted(disallowed),
                }
            ),
            flush=True,
        )
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    asyncio.run(_serve_forever(_parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
