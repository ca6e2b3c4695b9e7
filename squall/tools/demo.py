"""``make demo``: crawl a local multi-host web site end to end and check the crawl against the server's log.

::

    python -m squall.tools.demo [--site DIR] [--hosts N] [--pages N] [--delay S] [--disallow PREFIX]
                          [--bootstrap host:port] [--workdir DIR] [--timeout S]

What it does, in order, stopping everything it started on the way out
(normal end, error, Ctrl-C or SIGTERM):

1. **Broker**: uses the Kafka broker answering at ``--bootstrap`` (default:
   ``kafka.bootstrap.servers`` of :func:`squall.settings.load_settings`,
   ``$KAFKA_BOOTSTRAP_SERVERS`` overriding); if none answers, starts the local
   Maven-jar broker (:mod:`squall.tools.kafka_local`) and stops it at the end.
2. **Site**: serves, from a thread of this process, a
   :class:`squall.tools.testsite.RecordingServer` on loopback addresses
   ``127.0.0.2``, ``127.0.0.3``, ... (one per simulated host, one port): a
   generated interlinked site whose robots.txt disallows ``/private/``, or
   with ``--site DIR`` the files of a directory on ``127.0.0.2``. Every
   request the server receives is logged to ``<workdir>/requests.jsonl``.
3. **Crawl**: one real ``faust -A topology worker`` (:class:`squall.tools.harness.Crawl`)
   with its own topology id, seeded with each host's ``/``; waits until
   nothing is due, in flight or unconsumed.
4. **Report and checks**: counts by status and per host, time and pages/s,
   then checks computed from the server's recording — every expected page
   requested exactly once and FETCHED, disallowed pages never requested, the
   smallest gap between two requests to one host not below the configured
   delay, the WARC files readable by ``warcio index``.
5. **Search**: the documents topic (``documents.enabled`` is on for the
   demo) read into a local index under the workdir, as ``squall index``
   does, and one ``squall search`` for a crawled page's title. Exit status 0
   only if every check passes (1: a check failed; 2: the crawl could not run).

The demo's own configuration differs from the polite defaults in two ways,
both printed: loopback addresses are allowed (the SSRF guard refuses
private and loopback networks by default) and ``fetcher.server.delay`` is
shorter (the default of 1 s stays for the real web). Scope is pinned to the
demo's loopback hosts, so no request leaves 127.0.0.0/8.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import itertools
import json
import logging
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from squall.cli.status_report import clock, duration
from squall.tools.site_spec import Page, RobotsSpec, SiteSpec, directory_site, generated_site
from squall.tools.testsite import RecordingServer

GENERATED_DELAY_S = 0.2
SITE_DELAY_S = 0.05
# A directory with more HTML files than this is not replayed (too slow to be
# a useful expectation); the demo then checks the crawl against itself.
REPLAY_MAX_HTML_FILES = 20000
GAP_TOLERANCE_S = 0.002  # clock granularity between the worker's pacing and the server's arrival stamps


# ---------------------------------------------------------------------- the site, in a thread


class ServedSite:
    """A RecordingServer running on its own event loop in a daemon thread (as the integration tests do)."""

    def __init__(self, spec: SiteSpec, log_path: Path) -> None:
        self.server = RecordingServer(spec, log_path=log_path)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="demo-site", daemon=True)
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(30)
        except BaseException:
            self._stop_loop()
            raise

    def close(self) -> None:
        try:
            asyncio.run_coroutine_threadsafe(self.server.close(), self._loop).result(30)
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def requests(self) -> list[dict[str, Any]]:
        # The list is appended to from the server thread; copying it is safe (list ops hold the GIL).
        return self.server.requests

    def page_requests(self) -> collections.Counter[str]:
        """How many times each URL (robots.txt excluded) was requested."""
        port = self.server.port
        return collections.Counter(
            f"http://{r['ip']}:{port}{r['path']}" for r in self.requests() if r["path"] != "/robots.txt"
        )

    def min_gap(self, ip: str) -> tuple[float, int]:
        """(smallest gap between two request arrivals on host ``ip``, robots.txt included; number of requests)."""
        times = sorted(r["t"] for r in self.requests() if r["ip"] == ip)
        return min((b - a for a, b in itertools.pairwise(times)), default=float("inf")), len(times)


# ---------------------------------------------------------------------- checks


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


def _sample(items: Any, n: int = 5) -> str:
    items = sorted(items)
    more = f" … (+{len(items) - n})" if len(items) > n else ""
    return ", ".join(map(str, items[:n])) + more


def _with_status(records: dict[str, dict[str, Any]], urls: set[str]) -> list[str]:
    out = []
    for u in urls:
        rec = records.get(u)
        out.append(
            f"{u} ({rec.get('status')} {rec.get('reason') or ''})".replace(" )", ")") if rec else f"{u} (no record)"
        )
    return out


def _page_kind(spec: SiteSpec, u: str) -> str:
    """'page' (served 200), 'redirect', 'missing' (404) or 'other' for a URL of the site."""
    parts = urlsplit(u)
    host = spec.hosts.get(parts.hostname or "")
    if host is None:
        return "other"
    path = parts.path + ("?" + parts.query if parts.query else "")
    page = host.pages.get(path) or host.pages.get(parts.path)
    if page is None:
        return "missing"
    if not isinstance(page, Page):
        return "other"
    if page.location is not None:
        return "redirect"
    return "page" if page.status == 200 and not page.statuses else "other"


def _warcio() -> list[str] | None:
    exe = Path(sys.executable).parent / "warcio"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("warcio")
    return [found] if found else None


def warc_index(paths: list[Path]) -> tuple[bool, collections.Counter[str], str]:
    """Run ``warcio index`` on ``paths``: (exit status 0, counts by WARC-Type, error text)."""
    cmd = _warcio()
    if cmd is None:
        return False, collections.Counter(), "warcio is not installed"
    proc = subprocess.run([*cmd, "index", *map(str, paths)], capture_output=True, text=True)
    types: collections.Counter[str] = collections.Counter()
    for line in proc.stdout.splitlines():
        try:
            types[json.loads(line).get("warc-type", "?")] += 1
        except ValueError:
            types["(unparsable line)"] += 1
    return proc.returncode == 0, types, proc.stderr.strip()[-2000:]


# ---------------------------------------------------------------------- main


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m squall.tools.demo",
        description="Crawl a local multi-host web site end to end and check the result.",
    )
    p.add_argument(
        "--site",
        default=None,
        metavar="DIR",
        help="serve this directory of HTML on 127.0.0.2 instead of the generated site",
    )
    p.add_argument("--hosts", type=int, default=4, help="hosts of the generated site (default 4: 127.0.0.2..)")
    p.add_argument("--pages", type=int, default=25, help="pages per host of the generated site (default 25)")
    p.add_argument(
        "--delay",
        type=float,
        default=None,
        help=f"fetcher.server.delay, seconds (default {GENERATED_DELAY_S} for the generated site, "
        f"{SITE_DELAY_S} for --site)",
    )
    p.add_argument(
        "--disallow",
        default=None,
        metavar="PREFIX",
        help="robots.txt Disallow prefix (default /private/ for the generated site; for --site the "
        "directory's own robots.txt, or this prefix if given)",
    )
    p.add_argument("--bootstrap", default=None, help="Kafka broker host:port (default: kafka.bootstrap.servers)")
    p.add_argument("--workdir", default=None, help="crawl directory (default ./var/demo-<timestamp>)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds to wait for the crawl (default 1800)")
    p.add_argument(
        "--web-port",
        type=int,
        default=0,
        help="serve the worker's /metrics on 127.0.0.1 at this port (default 0: no web server)",
    )
    args = p.parse_args(argv)
    if args.site is None and not 1 <= args.hosts <= 250:
        p.error("--hosts must be between 1 and 250")
    if args.site is not None and not Path(args.site).is_dir():
        p.error(f"--site {args.site}: not a directory")
    return args


def _say(msg: str = "") -> None:
    print(msg, flush=True)


def _sigterm(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt  # unwinds through the finally blocks that stop what the demo started


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    # aiokafka warns (to stderr, via logging's last-resort handler) while freshly created topics elect leaders.
    logging.getLogger("aiokafka").setLevel(logging.ERROR)
    signal.signal(signal.SIGTERM, _sigterm)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    workdir = Path(args.workdir or f"./var/demo-{stamp}").resolve()
    workdir.mkdir(parents=True, exist_ok=True)

    from squall.settings import load_settings
    from squall.tools import kafka_local, kafka_probe

    bootstrap = args.bootstrap or load_settings().kafka_bootstrap_servers
    broker_started = False
    served: ServedSite | None = None
    crawl = None
    try:
        # ------------------------------------------------------------ broker
        _say(f"squall demo — workdir {workdir}")
        if kafka_probe.is_answering(bootstrap, timeout_s=5.0):
            _say(f"broker: using the Kafka broker answering at {bootstrap}")
        else:
            _say(f"broker: nothing answers at {bootstrap}; starting the local broker (Maven jars, KRaft)")
            broker_started = kafka_local.up(bootstrap, progress=_say)
            _say(
                f"broker: {'started' if broker_started else 'found'} at {bootstrap}"
                + (" (stopped at the end)" if broker_started else "")
            )

        # ------------------------------------------------------------ site
        if args.site:
            root = Path(args.site).resolve()
            ips = ["127.0.0.2"]
            spec = directory_site(root, ips[0])
            if args.disallow:
                spec.hosts[ips[0]].robots = RobotsSpec(text=f"User-agent: *\nDisallow: {args.disallow}\n")
            n_files = sum(len(h.pages) for h in spec.hosts.values())
            what = f"directory {root} ({n_files} paths)"
        else:
            ips = [f"127.0.0.{2 + i}" for i in range(args.hosts)]
            disallow = "/private/" if args.disallow is None else (args.disallow or None)
            spec = generated_site(ips, args.pages, disallow=disallow)
            what = f"generated site, {len(ips)} hosts × {args.pages} pages, robots.txt disallows {disallow}"
        log_path = workdir / "requests.jsonl"
        served = ServedSite(spec, log_path)
        port = served.server.port
        robots = {
            ip: (h.robots.text.strip().replace("\n", " | ") if h.robots else "(none: 404)")
            for ip, h in spec.hosts.items()
        }
        _say(f"site: {what}")
        _say(f"site: serving {', '.join(f'http://{ip}:{port}/' for ip in ips)}; requests logged to {log_path}")
        for ip in ips[:3]:
            _say(f"site: {ip} robots.txt: {robots[ip]}")
        if len(ips) > 3:
            _say(f"site: ... (same robots.txt on the other {len(ips) - 3} hosts)")

        # ------------------------------------------------------------ crawl
        from squall.tools.harness import Crawl

        delay = args.delay if args.delay is not None else (SITE_DELAY_S if args.site else GENERATED_DELAY_S)
        overrides: dict[str, Any] = {
            "http.private.networks.allow": ["127.0.0.0/8"],
            "urlfilters.hosts.allow": ips,
            "fetcher.server.delay": delay,
            "topology.partitions": 4,
            "documents.enabled": True,
            "index.dir": str(workdir / "index"),
        }
        topology_id = f"squall-demo-{stamp}-{uuid.uuid4().hex[:6]}"
        crawl = Crawl(workdir, bootstrap, overrides, topology_id=topology_id)
        default_delay = load_settings(overrides={})["fetcher.server.delay"]
        _say(f"crawl: topology {topology_id}, config {crawl.conf_path}")
        _say(
            "crawl: http.private.networks.allow = [127.0.0.0/8] — the SSRF guard refuses loopback and private "
            "addresses by default; the demo's hosts are loopback"
        )
        _say(f"crawl: urlfilters.hosts.allow = {ips} — scope pinned to the demo's hosts")
        _say(
            f"crawl: fetcher.server.delay = {delay:g} s for these loopback hosts (the default, {default_delay:g} s,"
            " stays for the real web)"
            + ("; shorter than the generated site's since one host serves the whole directory" if args.site else "")
        )
        crawl.start_worker("w1", web_port=args.web_port or None)
        _say(f"crawl: worker w1 started (log {workdir / 'worker-w1.log'})")
        if args.web_port:
            _say(f"crawl: metrics at http://127.0.0.1:{args.web_port}/metrics")
        _say(f"crawl: watch it with `SQUALL_CONF={crawl.conf_path} squall status --watch` or `... squall dashboard`")
        seeds = served.server.seeds
        t0, t0_wall = time.monotonic(), time.time()
        n = crawl.seed(seeds)
        _say(f"crawl: seeded {n} URL(s): {', '.join(seeds)}; waiting until idle (timeout {args.timeout:g} s) ...")
        report = crawl.wait_idle(timeout_s=args.timeout, on_report=_progress(t0))
        elapsed = time.monotonic() - t0
        records = crawl.records()

        # ------------------------------------------------------------ summary
        _say()
        _say("=" * 78)
        _say("summary (from the urls and hosts changelogs)")
        _say("=" * 78)
        _say(report.to_text())
        fetched = report.by_status.get("FETCHED", 0)
        requests = served.requests()
        _say(
            f"elapsed: {elapsed:.1f} s from seeding to idle (worker start-up included); {fetched} pages FETCHED, "
            f"{fetched / elapsed:.2f} pages/s; {len(requests)} requests received by the site "
            f"({sum(1 for r in requests if r['path'] == '/robots.txt')} of robots.txt)"
        )
        if len(requests) > 1:
            first, last = min(r["t"] for r in requests), max(r["t"] for r in requests)
            _say(
                f"site: first request {first - t0_wall:.1f} s after seeding, last {last - t0_wall:.1f} s; "
                f"{len(requests) / max(last - first, 1e-9):.2f} requests/s in between"
            )

        checks = _checks(args, spec, served, records, delay, crawl.warc_files())
        checks.append(_audit_check(crawl.audit(), served.requests()))
        checks += _search_step(crawl, records)
        _say()
        _say("=" * 78)
        _say("checks (from the site's own request log)")
        _say("=" * 78)
        for c in checks:
            _say(f"[{'PASS' if c.ok else 'FAIL'}] {c.name}: {c.detail}")
        _say()
        warcs = crawl.warc_files()
        for w in warcs:
            _say(f"WARC: {w}")
        _say(f"request log: {log_path}")
        ok = all(c.ok for c in checks)
        _say(f"demo: {'all checks passed' if ok else 'SOME CHECKS FAILED'}")
        return 0 if ok else 1
    except KeyboardInterrupt:
        _say("\ndemo: interrupted; stopping what it started")
        return 130
    except Exception as exc:
        _say(f"\ndemo: error: {type(exc).__name__}: {exc}")
        log = workdir / "worker-w1.log"
        if log.exists():
            tail = log.read_text("utf-8", "replace").splitlines()[-20:]
            _say(f"--- last lines of {log}:\n" + "\n".join(tail))
        return 2
    finally:
        # Finish cleaning up even if asked to stop again (each step is bounded by its own timeout).
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _cleanup("worker", crawl.stop if crawl is not None else None)
        _cleanup("site", served.close if served is not None else None)
        if broker_started:
            _cleanup(f"local broker at {bootstrap}", lambda: kafka_local.down(bootstrap, wipe=True))


def _search_step(crawl: Any, records: dict[str, dict[str, Any]]) -> list[Check]:
    """Index the crawl's documents topic (``squall index --until-idle``) and search it for one page's title.

    The page searched for: the first FETCHED page (in URL order) whose
    document is in the index. Checks: one document per FETCHED HTML page
    without noindex (``parse.charset`` recorded, no ``parse.noindex``), and
    that page among the first three hits.
    """
    from squall.cli.index import format_hits
    from squall.index import SearchIndex, consume, group_id
    from squall.net.kafka_security import KafkaConnection
    from squall.policy.topics import topic_name

    settings = crawl.settings
    languages: collections.Counter[str] = collections.Counter()
    titles: dict[str, str] = {}
    with_text = 0

    def seen(doc: Any) -> None:
        nonlocal with_text
        languages[doc.language] += 1
        with_text += bool(doc.text.strip())
        if doc.title:
            titles[doc.url] = doc.title

    index = SearchIndex(Path(settings.index_dir), writable=True)
    try:
        stats = asyncio.run(
            consume(
                KafkaConnection.from_settings(settings),
                topic_name(settings, "documents"),
                group_id(settings.topology_id),
                index,
                commit_interval_s=settings.index_commit_interval_secs,
                idle_s=2.0,
                on_document=seen,
            )
        )
    finally:
        index.close()
    expected = {
        u
        for u, r in records.items()
        if r.get("status") == "FETCHED"
        and "parse.charset" in (r.get("metadata") or {})
        and "parse.noindex" not in (r.get("metadata") or {})
    }
    indexed = index.count()
    share = with_text / stats.indexed if stats.indexed else 0.0
    _say()
    _say(
        f"documents: {stats.indexed} read from {topic_name(settings, 'documents')} into {settings.index_dir} "
        f"({indexed} pages); {share:.1%} with text; languages "
        + ", ".join(f"{lang}={n}" for lang, n in languages.most_common(5))
    )
    checks = [
        Check(
            "one document per FETCHED HTML page",
            indexed == len(expected) and set(titles) <= expected,
            f"{indexed} in the index, {len(expected)} FETCHED HTML pages without noindex",
        )
    ]
    target = next((u for u in sorted(expected) if u in titles), None)
    if target is None:
        return [*checks, Check("search finds a page by its title", False, "no document with a title")]
    query = titles[target]
    hits = SearchIndex(Path(settings.index_dir)).search(query, 3)
    _say(f"search: squall search {query!r}")
    for line in format_hits(hits):
        _say(line)
    found = target in [h.url for h in hits]
    return [*checks, Check("search finds a page by its title", found, f"{target} for {query!r}")]


def _progress(t0: float) -> Any:
    """A callback printing one progress line per report while the crawl runs (``make demo`` on long work)."""

    def show(report: Any) -> None:
        by = report.by_status
        waiting = f", {report.waiting} waiting until {clock(report.waiting_until_s)}" if report.waiting else ""
        _say(
            f"progress: {time.monotonic() - t0:6.1f} s  URLs {sum(by.values())}  FETCHED {by.get('FETCHED', 0)}  "
            f"to fetch {by.get('DISCOVERED', 0)}  in flight {report.in_flight}{waiting}  "
            f"{report.pages_per_s_recent:.2f} pages/s  ETA {duration(report.eta_s)}  "
            f"audit violations {report.audit_violations}"
        )

    return show


def _audit_check(audit: dict[str, Any], requests: list[dict[str, Any]]) -> Check:
    """The crawler's own politeness audit: every request the site received audited, no violation."""
    detail = (
        f"{audit['requests']} requests audited for {len(requests)} received, {audit['violations']} violations "
        f"({audit['inside_block']} inside a Retry-After/back-off block)"
    )
    return Check(
        "politeness audit (squall audit)", audit["violations"] == 0 and audit["requests"] == len(requests), detail
    )


def _cleanup(what: str, stop: Any) -> None:
    if stop is None:
        return
    try:
        stop()
        _say(f"stopped: {what}")
    except Exception as exc:
        _say(f"demo: could not stop {what}: {type(exc).__name__}: {exc}")


def _checks(
    args: argparse.Namespace,
    spec: SiteSpec,
    served: ServedSite,
    records: dict[str, dict[str, Any]],
    delay: float,
    warcs: list[Path],
) -> list[Check]:
    checks: list[Check] = []
    server = served.server
    requested = served.page_requests()
    twice = {u: n for u, n in requested.items() if n > 1}
    fetched_urls = {u for u, r in records.items() if r.get("status") == "FETCHED"}
    html_files = sum(1 for h in spec.hosts.values() for p in h.pages if p.endswith((".html", "/")))
    replay = not args.site or html_files <= REPLAY_MAX_HTML_FILES

    if replay:
        t = time.monotonic()
        expected = server.expected_pages()
        disallowed = server.disallowed_pages()
        took = time.monotonic() - t
        # A linked URL the site does not serve (404) or redirects is expected to be requested, not FETCHED.
        kinds = {u: _page_kind(spec, u) for u in expected}
        expect_fetched = {u for u, k in kinds.items() if k == "page"}
        not_pages = collections.Counter(k for k in kinds.values() if k != "page")
        how = (
            "replayed from the index" if args.site else "replayed from each host's /"
        ) + f" with the crawler's link parser and robots rules in {took:.1f} s"
        checks.append(
            Check(
                "expected pages",
                bool(expect_fetched),
                f"{len(expected)} URLs reachable and allowed ({how})"
                + (
                    f"; of them {dict(not_pages)} not served as pages (requested, not FETCHED): "
                    f"{_sample(u for u, k in kinds.items() if k != 'page')}"
                    if not_pages
                    else ""
                ),
            )
        )
        missing = expected - set(requested)
        extra = set(requested) - expected
        checks.append(
            Check(
                "every expected URL requested",
                not missing,
                f"{len(expected) - len(missing)}/{len(expected)}"
                + (f"; never requested: {_sample(missing)}" if missing else ""),
            )
        )
        checks.append(
            Check(
                "nothing else requested",
                not extra,
                "no request outside the expected set" if not extra else f"{len(extra)} unexpected: {_sample(extra)}",
            )
        )
        checks.append(
            Check(
                "each URL requested exactly once",
                not twice,
                f"{len(requested)} URLs, {sum(requested.values())} requests"
                + (f"; repeated: {_sample(f'{u} ×{n}' for u, n in twice.items())}" if twice else ""),
            )
        )
        not_fetched = expect_fetched - fetched_urls
        other_fetched = fetched_urls - expect_fetched
        checks.append(
            Check(
                "every expected page FETCHED",
                not not_fetched and not other_fetched,
                f"{len(expect_fetched & fetched_urls)}/{len(expect_fetched)} FETCHED"
                + (f"; not FETCHED: {_sample(_with_status(records, not_fetched))}" if not_fetched else "")
                + (f"; FETCHED but not expected: {_sample(other_fetched)}" if other_fetched else ""),
            )
        )
        once = [u for u in expect_fetched & fetched_urls if records[u].get("attempts", 1) != 1]
        checks.append(
            Check(
                "fetched in one attempt",
                not once,
                "every FETCHED record has attempts=1" if not once else f"several attempts: {_sample(once)}",
            )
        )
        if disallowed:
            hit = disallowed & set(requested)
            denied = {u for u, r in records.items() if r.get("reason") == "robots.denied"}
            checks.append(
                Check(
                    "disallowed pages never requested",
                    not hit,
                    f"{len(disallowed)} disallowed URLs, {len(hit)} requested"
                    + (f": {_sample(hit)}" if hit else "")
                    + f"; {len(denied & disallowed)} recorded ERROR robots.denied",
                )
            )
        else:
            checks.append(
                Check(
                    "disallowed pages never requested",
                    True,
                    "nothing to check: the site's robots.txt disallows nothing (see --disallow)",
                )
            )
    else:
        checks.append(
            Check(
                "expected pages",
                True,
                f"not replayed ({html_files} HTML files > {REPLAY_MAX_HTML_FILES}): checking the crawl "
                "against the request log instead",
            )
        )
        unrequested = {u for u in fetched_urls if requested.get(u, 0) == 0}
        checks.append(
            Check(
                "every FETCHED URL requested exactly once",
                not unrequested and not twice,
                f"{len(fetched_urls)} FETCHED"
                + (f"; FETCHED without a request: {_sample(unrequested)}" if unrequested else "")
                + (f"; repeated: {_sample(f'{u} ×{n}' for u, n in twice.items())}" if twice else ""),
            )
        )
        checks.append(
            Check("nothing requested twice", not twice, f"{sum(requested.values())} requests, {len(requested)} URLs")
        )

    # robots.txt: once per host (one fetch, then cached).
    robots_n = collections.Counter(r["ip"] for r in served.requests() if r["path"] == "/robots.txt")
    bad_robots = {ip: robots_n.get(ip, 0) for ip in spec.hosts if robots_n.get(ip, 0) != 1}
    checks.append(
        Check(
            "robots.txt fetched once per host",
            not bad_robots,
            "1 request per host" if not bad_robots else f"requests per host: {bad_robots}",
        )
    )

    # Politeness: the gap between two request arrivals on one host (robots.txt included).
    gaps = {ip: served.min_gap(ip) for ip in spec.hosts}
    slow = {ip: g for ip, (g, _n) in gaps.items() if g < delay - GAP_TOLERANCE_S}
    shown = ", ".join(f"{ip} {g:.3f} s ({n} req)" for ip, (g, n) in sorted(gaps.items()) if n > 1) or "n/a"
    checks.append(Check(f"min gap per host >= fetcher.server.delay {delay:g} s", not slow, shown))

    # WARC: readable by warcio index; one response record per answered page request (robots.txt is not archived).
    if not warcs:
        checks.append(Check("WARC files", False, "no *.warc.gz written"))
    else:
        ok, types, err = warc_index(warcs)
        answered = sum(1 for r in served.requests() if r["path"] != "/robots.txt" and r["status"] is not None)
        detail = (
            f"`warcio index` on {len(warcs)} file(s): exit {'0' if ok else 'non-zero'}, "
            f"records {dict(types)}; {types.get('response', 0)} response records for {answered} answered "
            "page requests"
        )
        if err and not ok:
            detail += f"; stderr: {err}"
        checks.append(Check("WARC readable by warcio index", ok and types.get("response", 0) == answered, detail))
    return checks


if __name__ == "__main__":
    sys.exit(main())
