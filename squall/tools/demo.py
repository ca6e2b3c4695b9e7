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

The site and its recording are :mod:`squall.tools.demo_site`; the checks of
step 4 are :mod:`squall.tools.demo_checks`.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import logging
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from squall.cli.status_report import clock, duration
from squall.tools.demo_checks import Check, audit_check, site_checks
from squall.tools.demo_site import ServedSite
from squall.tools.site_spec import RobotsSpec, directory_site, generated_site

GENERATED_DELAY_S = 0.2
SITE_DELAY_S = 0.05


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

        checks = site_checks(args, spec, served, records, delay, crawl.warc_files())
        checks.append(audit_check(crawl.audit(), served.requests()))
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


def _cleanup(what: str, stop: Any) -> None:
    if stop is None:
        return
    try:
        stop()
        _say(f"stopped: {what}")
    except Exception as exc:
        _say(f"demo: could not stop {what}: {type(exc).__name__}: {exc}")


if __name__ == "__main__":
    sys.exit(main())
