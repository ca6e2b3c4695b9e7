"""Seeing a crawl while it runs: /metrics, the dashboard in a real browser, squall audit/status/tail, topics.

One crawl of a generated multi-host site (the demo's kind) with one worker
serving its web port, a ``squall dashboard`` process and a headless
Chromium (Debian's /usr/bin/chromium through Playwright, never a
downloaded browser) that loads the dashboard while the crawl runs. Every
number is checked against the crawl's own results (``squall status
--json``) and against the recording server's log.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import async_playwright
from prometheus_client.parser import text_string_to_metric_families

from squall.tools.harness import Crawl
from squall.settings import ROOT
from squall.tools.site_spec import generated_site

from .conftest import BASE_OVERRIDES, ServedSite

HOSTS = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
DELAY_S = 0.2
WORKER_WEB_PORT = 19701
DASHBOARD_PORT = 19702
# squall.net.browser.CHROMIUM_ARGS are the render pool's (they send every request, loopback included, to a dead
# proxy: the pool serves them itself); the dashboard is a plain loopback page, so these flags only
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = ROOT / "var" / "test-artifacts"


def scrape(port: int) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """name → {sorted labels: value} of every sample at http://127.0.0.1:port/metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def total(samples: dict[tuple[tuple[str, str], ...], float], **labels: str) -> float:
    return sum(v for k, v in samples.items() if all(dict(k).get(n) == want for n, want in labels.items()))


def squall_cli(crawl: Crawl, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SQUALL_CONF=str(crawl.conf_path), COLUMNS="200")  # rich: a wide terminal
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    return subprocess.run([sys.executable, "-m", "squall.cli.main", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


class Browser:
    """Headless Chromium through Playwright's async API on a thread of its own (the harness uses asyncio.run)."""

    def __init__(self, executable: Path) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._pw = self.call(lambda: async_playwright().start())
        self._browser = self.call(lambda: self._pw.chromium.launch(executable_path=str(executable), headless=True,
                                                                   args=CHROMIUM_FLAGS[1:]))
        self.page = self.call(lambda: self._browser.new_page(viewport={"width": 1400, "height": 1000}))

    def call(self, make: Callable[[], Awaitable[Any]], timeout_s: float = 60.0) -> Any:
        async def run() -> Any:
            return await make()
        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout_s)

    def dom(self, script: str) -> Any:
        """Evaluate ``script`` (a JS expression) in the dashboard page."""
        return self.call(lambda: self.page.evaluate(script))

    def close(self) -> None:
        self.call(lambda: self._browser.close())
        self.call(lambda: self._pw.stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    """Headless Debian chromium (squall.net.browser.find_chromium); FAILS (not skips) with one line when missing."""
    from squall.net.browser import find_chromium
    from squall.errors import BrowserMissing

    try:
        executable = find_chromium()
    except BrowserMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    browser = Browser(executable)
    try:
        yield browser
    finally:
        browser.close()


# everything the tests read from the dashboard, in one evaluation
READ_DOM = """(() => {
  const t = id => document.getElementById(id).textContent;
  const rows = [...document.querySelectorAll('#hosts tbody tr')].map(tr => Object.fromEntries(
      [['host', tr.dataset.host], ...[...tr.cells].map(td => [td.dataset.col, td.textContent])]));
  return {total: t('total'), state: t('state'), updated_at: Number(document.getElementById('updated').dataset.at),
          statuses: Object.fromEntries(['FETCHED', 'DISCOVERED', 'REDIRECTION', 'FETCH_ERROR', 'ERROR']
                                       .map(s => [s, t('st-' + s)])),
          due: t('due'), waiting: t('waiting'), violations: t('violations'), audit_requests: t('audit-requests'),
          rows,
          points: [...document.querySelectorAll('#audit-chart circle')].map(c => ({
              host: c.dataset.host, gap: Number(c.dataset.gap), required: Number(c.dataset.required),
              cls: c.getAttribute('class')})),
          reasons: [...document.querySelectorAll('#reasons tbody tr')].map(tr => tr.dataset.reason),
          progress: !!document.querySelector("#progress path[data-series='fetched']")};
})()"""


@dataclass
class Observed:
    served: ServedSite
    crawl: Crawl
    live_metrics: list[dict[str, Any]]   # scrapes taken while the crawl was not idle yet
    live_dom: dict[str, Any]             # what the dashboard showed while the crawl ran
    browser: Browser                     # the dashboard page, still open
    status: dict[str, Any]               # squall status --json after the crawl


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory, kafka_bootstrap: str, chromium: Browser) -> Iterator[Observed]:
    tmp = tmp_path_factory.mktemp("observe")
    spec = generated_site(HOSTS, 6)
    served = ServedSite(spec, tmp / "requests.jsonl")
    crawl = Crawl(tmp / "crawl", kafka_bootstrap, {**BASE_OVERRIDES, "fetcher.server.delay": DELAY_S})
    env = dict(os.environ, SQUALL_CONF=str(crawl.conf_path))
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    dash_log = open(tmp / "dashboard.log", "wb")  # noqa: SIM115
    dashboard = subprocess.Popen([sys.executable, "-m", "squall.cli.main", "dashboard", "--port", str(DASHBOARD_PORT)],
                                 cwd=ROOT, env=env, stdout=dash_log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{DASHBOARD_PORT}/"
    try:
        crawl.start_worker(web_port=WORKER_WEB_PORT)
        crawl.seed(served.seeds)
        live_metrics: list[dict[str, Any]] = []
        live_dom: dict[str, str] = {}
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # while the crawl runs: scrape, and load the dashboard once
            try:
                live_metrics.append(scrape(WORKER_WEB_PORT))
            except OSError:
                pass  # the worker's web server is not up yet
            if not live_dom:
                try:
                    chromium.call(lambda: chromium.page.goto(url, timeout=10_000))
                    chromium.call(lambda: chromium.page.wait_for_selector("body[data-loaded='1']", timeout=10_000))
                    live_dom = chromium.dom(READ_DOM)
                except Exception:  # noqa: BLE001 (the dashboard process may not listen yet: retry)
                    live_dom = {}
            if live_metrics and live_dom and crawl.report().by_status:
                break
            time.sleep(0.5)
        crawl.wait_idle(timeout_s=300)
        status = json.loads(squall_cli(crawl, "status", "--json").stdout)
        yield Observed(served, crawl, live_metrics, live_dom, chromium, status)
    finally:
        dashboard.terminate()
        dashboard.wait(30)
        dash_log.close()
        crawl.stop()
        served.close()


# ---------------------------------------------------------------------------- /metrics

def test_metrics_answer_during_the_crawl_and_agree_with_the_crawl_and_the_server_after(observed: Observed) -> None:
    assert observed.live_metrics, "no scrape of /metrics succeeded while the crawl ran"
    assert all(total(m.get("squall_audit_violations_total", {})) == 0 for m in observed.live_metrics)
    m = scrape(WORKER_WEB_PORT)
    assert m and all(name.startswith("squall_") for name in m), sorted(m)
    status, requests = observed.status, observed.served.requests()
    by_status = status["by_status"]
    robots = [r for r in requests if r["path"] == "/robots.txt"]
    pages = [r for r in requests if r["path"] != "/robots.txt"]
    # the counters against the crawl's own results
    assert total(m["squall_fetch_results_total"], status="FETCHED") == by_status["FETCHED"]
    denied = status["reasons"].get("robots.denied", 0)
    assert total(m["squall_fetch_results_total"], reason="robots.denied") == denied > 0
    for s in ("DISCOVERED", "FETCHED", "ERROR"):
        assert total(m["squall_urls"], status=s) == by_status.get(s, 0), s
    assert total(m["squall_due_urls"]) == 0 and total(m["squall_in_flight_urls"]) == 0
    assert total(m["squall_pages_per_second"]) > 0
    # ... and against the recording server
    assert total(m["squall_robots_fetches_total"]) == len(robots) == len(HOSTS)
    assert total(m["squall_robots_fetches_total"], outcome="2xx") == len(HOSTS)
    assert total(m["squall_audit_requests_total"]) == len(requests)
    assert total(m["squall_audit_violations_total"]) == 0
    assert total(m["squall_fetch_duration_seconds_count"]) == len(pages)
    assert total(m["squall_fetched_bytes_total"]) > 0
    for ip in HOSTS:  # three hosts, metrics.hosts.top 10: every host has its series
        assert total(m["squall_host_requests"], host=ip) == len([r for r in requests if r["ip"] == ip])
        assert total(m["squall_host_audit_violations"], host=ip) == 0
        assert total(m["squall_host_min_gap_seconds"], host=ip) >= DELAY_S
    assert set(dict(k)["topic"] for k in m["squall_consumer_lag"]) >= {f"{observed.crawl.topology_id}-fetch"}
    # bounded label cardinality: no label carries a URL
    assert not [k for fam in m.values() for k in fam for _, v in k if "://" in v]


def test_the_metrics_page_is_served_on_loopback_only(observed: Observed) -> None:
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.2:{WORKER_WEB_PORT}/metrics", timeout=5)


# ---------------------------------------------------------------------------- squall audit

def test_squall_audit_reports_every_request_and_no_violation_as_the_server_measured(observed: Observed) -> None:
    result = squall_cli(observed.crawl, "audit", "--json")
    assert result.returncode == 0, result.stderr
    audit = json.loads(result.stdout)
    requests = observed.served.requests()
    assert audit["violations"] == 0 and audit["requests"] == len(requests)
    for host in audit["by_host"]:
        ip = host["key"]
        assert host["requests"] == len(observed.served.start_times(ip))
        assert host["violations"] == 0
        assert host["min_gap_s"] <= observed.served.min_gap(ip) + 0.05  # the audit measures what the server saw
        assert observed.served.min_gap(ip) >= DELAY_S
    text = squall_cli(observed.crawl, "audit")
    assert text.returncode == 0 and "0 violations" in text.stdout.splitlines()[0], text.stdout


# ---------------------------------------------------------------------------- the dashboard in a browser

def test_the_dashboard_shows_the_numbers_of_squall_status_in_a_real_browser(observed: Observed) -> None:
    assert observed.live_dom.get("total", "–") not in ("", "–"), observed.live_dom  # it showed numbers mid-crawl
    b, status = observed.browser, observed.status
    # wait for a refresh that happened after the crawl was idle (the page polls every 2 s)
    b.call(lambda: b.page.wait_for_function(
        f"Number(document.getElementById('updated').dataset.at) > {status['at_s']}", timeout=20_000))
    dom = b.dom(READ_DOM)
    assert int(dom["total"]) == status["total"]
    for s, n in dom["statuses"].items():
        assert int(n) == status["by_status"].get(s, 0), s
    assert int(dom["due"]) == status["due_now"] == 0
    assert int(dom["waiting"]) == status["waiting"] == 0
    assert dom["state"] == "idle"
    assert int(dom["violations"]) == 0
    assert int(dom["audit_requests"]) == len(observed.served.requests())
    rows = {r["host"]: r for r in dom["rows"]}
    assert sorted(rows) == sorted(h["host"] for h in status["hosts"])
    for ip in HOSTS:
        assert int(rows[ip]["fetched"]) == status["by_host"][ip]["FETCHED"]
        assert int(rows[ip]["requests"]) == len(observed.served.start_times(ip))
        assert int(rows[ip]["violations"]) == 0
    # the audit chart: one point per host, none below the diagonal
    assert sorted(p["host"] for p in dom["points"]) == sorted(HOSTS)
    for p in dom["points"]:
        assert p["gap"] >= p["required"] - 0.01 and p["cls"] == "polite", p
    assert set(dom["reasons"]) == set(status["reasons"])
    assert dom["progress"]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    b.call(lambda: b.page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True))


def test_the_host_table_sorts_by_a_clicked_column(observed: Observed) -> None:
    b = observed.browser

    def order(col: str) -> list[str]:
        b.call(lambda: b.page.click(f"#hosts th[data-col='{col}']"))
        return [r[col] for r in b.dom(READ_DOM)["rows"]]

    hosts = order("host")  # a text column sorts ascending first
    assert hosts == sorted(hosts)
    hosts = order("host")
    assert hosts == sorted(hosts, reverse=True)
    reqs = [int(n) for n in order("requests")]
    assert reqs == sorted(reqs, reverse=True)
    reqs = [int(n) for n in order("requests")]
    assert reqs == sorted(reqs)


# ---------------------------------------------------------------------------- topics: readable by any tool

def test_every_topic_holds_json_values_under_string_keys(observed: Observed) -> None:
    import asyncio

    from squall.tools.kafka_admin import read_topic
    from squall.policy.topics import all_topics

    async def read(topic: str) -> list[tuple[bytes | None, bytes | None]]:
        return [kv async for kv in read_topic(observed.crawl.settings["kafka.bootstrap.servers"], topic,
                                              missing_ok=True)]

    seen: Counter[str] = Counter()
    for topic in all_topics(observed.crawl.settings):
        for key, value in asyncio.run(read(topic)):
            assert key is not None and key.decode("utf-8"), (topic, key)
            if value is not None:
                assert isinstance(json.loads(value), dict), (topic, value[:200])
            seen[topic] += 1
    tid = observed.crawl.topology_id
    # no "signals": a fetch result carries its signal, and every hand-out of this crawl had a result
    for suffix in ("status", "fetch", "ticks", "urls-changelog", "hosts-changelog",
                   "robots-changelog", "audit-changelog"):
        assert seen[f"{tid}-{suffix}"] > 0, (suffix, seen)


def test_squall_tail_prints_decoded_messages(observed: Observed) -> None:
    result = squall_cli(observed.crawl, "tail", "status", "--from-beginning", "--max", "3", "--json",
                        "--timeout", "20")
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == 3, result.stderr
    assert all(rec["json"] and isinstance(rec["key"], str) and "url" in rec["value"] for rec in lines)
    text = squall_cli(observed.crawl, "tail", "ticks", "--from-beginning", "--max", "1", "--timeout", "20")
    assert f"{observed.crawl.topology_id}-ticks[" in text.stdout and '"sent_at_s"' in text.stdout, text


def test_a_screenshot_of_the_dashboard_is_kept(observed: Observed) -> None:
    shot = ARTIFACTS / "dashboard.png"
    if not shot.exists():
        b = observed.browser
        b.call(lambda: b.page.screenshot(path=str(shot), full_page=True))
    assert shot.stat().st_size > 10_000
    if os.environ.get("SQUALL_UPDATE_DOCS"):  # refresh docs/dashboard.png: SQUALL_UPDATE_DOCS=1
        shutil.copy(shot, ROOT / "docs" / "dashboard.png")


def test_the_live_view_shows_the_crawl_and_returns_once_idle(observed: Observed) -> None:
    result = squall_cli(observed.crawl, "status", "--watch", "--wait-idle", "--interval", "0.5", "--timeout", "60")
    assert result.returncode == 0, result.stderr
    out = result.stdout  # not a terminal: plain snapshots, one per refresh
    fetched = observed.status["by_status"]["FETCHED"]
    assert out.startswith("--- ") and out.count("\n--- ") >= 1, out  # settled twice in a row: two snapshots
    assert f"FETCHED={fetched}" in out and "idle: nothing due, in flight, unconsumed or waiting" in out, out
    assert "busiest hosts" in out and all(ip in out for ip in HOSTS), out
    assert "audit violations: 0" in out and "\x1b[" not in out


# keep last: it restarts the worker and fetches one more page
def test_the_audit_survives_a_worker_restart(observed: Observed) -> None:
    crawl, served = observed.crawl, observed.served
    ip = HOSTS[0]
    before = {h["key"]: h for h in crawl.audit()["by_host"]}[ip]
    crawl.stop_worker("w1")                      # clean shutdown; the audit table is on its changelog
    crawl.start_worker("w1")                     # recovers the tables from the changelogs
    target = served.url(ip, "/nofollow-target")  # linked only with rel=nofollow: not crawled yet
    crawl.seed([target])
    deadline = time.monotonic() + 180
    while crawl.records().get(target, {}).get("status") != "FETCHED" and time.monotonic() < deadline:
        time.sleep(1.0)
    crawl.wait_idle(timeout_s=120)
    after = {h["key"]: h for h in crawl.audit()["by_host"]}[ip]
    times = served.start_times(ip)
    # the new owner continued the recovered record: one more request, counted with the ones before the restart
    assert after["requests"] == before["requests"] + 1 == len(times), (before, after)
    assert after["first_start_s"] == before["first_start_s"]
    assert after["violations"] == 0 and after["min_gap_s"] == pytest.approx(before["min_gap_s"])
