"""Tests of squall.policy.render_policy: which pages are rendered, which browser requests may go, budget and cache."""

from __future__ import annotations

import pytest

from squall.errors import ConfigError
from squall.policy.netsafety import NetworkPolicy
from squall.policy.parse import parse_html
from squall.policy.render_policy import (Refusal, RenderConfig, RenderFailure, RenderOutcome, RobotsAnswer, SubRequest,
                                  SubresourceCache, cacheable, judge_request, shell_signals, should_render)
from squall.settings import load_settings

PAGE = "https://app.example/products"


def config(**overrides) -> RenderConfig:
    values = {"render.enabled": True}
    values.update(overrides)
    return RenderConfig.from_settings(load_settings(overrides=values))


def signals(html: str):
    body = html.encode()
    return shell_signals(body, parse_html(body, url=PAGE, headers=[("Content-Type", "text/html")]))


SHELLS = [  # (html, signature) — pages that need a browser
    ('<html><body><div id="root"></div><script src="/main.js"></script></body></html>', "mount:root"),
    ("<html><body><div id='app'>  </div><script src=/app.js></script></body></html>", "mount:app"),
    ('<body><div id="__next"></div><script id="__NEXT_DATA__" type="application/json">{}</script></body>', "mount:__next"),
    ('<body><script id="__NEXT_DATA__" type="application/json">{"props":{}}</script><div>x</div></body>', "next"),
    ("<body><script>window.__NUXT__={}</script></body>", "nuxt"),
    ("<body><app-root></app-root><script src=main.js></script></body>", "angular"),
]


@pytest.mark.parametrize("html,signature", SHELLS)
def test_an_application_shell_is_recognised_by_its_framework_signature(html, signature):
    s = signals(html)
    assert s.signature == signature
    assert should_render(config(), "app.example", s).render


def test_scripts_with_almost_no_text_and_no_links_look_like_a_shell():
    s = signals('<html><body><noscript>enable JS</noscript><script src="/bundle.js"></script></body></html>')
    assert s.signature is None and s.scripts == 1
    assert should_render(config(), "app.example", s).why == "scripts and little text"


DECISIONS = [  # (overrides, html, host, render?, why)
    ({"render.enabled": False}, '<div id="root"></div>', "app.example", False, "disabled"),
    ({}, '<div id="root"></div><a href="/a">a</a><a href="/b">b</a><a href="/c">c</a>', "app.example", False, "has links"),
    ({}, '<div id="root"></div><a href="/a">a</a><a href="/b">b</a>', "app.example", True, "shell mount:root"),
    ({}, "<p>" + "words " * 100 + "</p><script src=x.js></script>", "app.example", False, "no shell signature"),
    ({}, "<p>plain page, no script</p>", "app.example", False, "no shell signature"),
    ({"render.hosts.allow": ["App.Example"]}, "<a href=/a>a</a>" * 9, "app.example", True, "render.hosts.allow"),
    ({"render.detect.shell": False}, '<div id="root"></div>', "app.example", False, "host not listed"),
    ({}, '<meta name="robots" content="nofollow"><div id="root"></div>', "app.example", False, "nofollow"),
]


@pytest.mark.parametrize("overrides,html,host,render,why", DECISIONS)
def test_should_render_decides_by_switch_host_list_and_shell_signals(overrides, html, host, render, why):
    decision = should_render(config(**overrides), host, signals(html))
    assert (decision.render, decision.why) == (render, why)


def allowed(_url: str) -> RobotsAnswer:
    return RobotsAnswer.ALLOWED


def judge(url: str, *, method="GET", kind="script", nav=False, sent=0, robots=allowed, cfg=None, mode="byHost",
          page=PAGE):
    return judge_request(SubRequest(url=url, method=method, resource_type=kind, main_frame_navigation=nav),
                         page_url=page, config=cfg or config(), mode=mode, network=NetworkPolicy(),
                         robots=robots, sent=sent)


REQUESTS = [  # (url, keyword arguments, refusal or None)
    ("https://app.example/main.js", {}, None),
    ("https://app.example/api/items", {"kind": "fetch"}, None),
    ("https://app.example/api/items", {"kind": "fetch", "method": "POST"}, Refusal.METHOD),
    ("data:text/javascript,1", {}, Refusal.SCHEME),
    ("ftp://app.example/x", {}, Refusal.SCHEME),
    ("https://app.example/logo.png", {"kind": "image"}, Refusal.RESOURCE_TYPE),
    ("https://app.example/font.woff2", {"kind": "font"}, Refusal.RESOURCE_TYPE),
    ("https://app.example/intro.mp4", {"kind": "media"}, Refusal.RESOURCE_TYPE),
    ("https://app.example/login", {"kind": "document", "nav": True}, Refusal.NAVIGATION),
    ("https://cdn.other.example/lib.js", {}, Refusal.OTHER_SITE),
    ("https://static.app.example/lib.js", {}, Refusal.OTHER_SITE),  # byHost: another host is another queue
    ("http://10.0.0.1/steal", {}, Refusal.OTHER_SITE),
    ("https://app.example/private", {"robots": lambda u: RobotsAnswer.DENIED}, Refusal.ROBOTS_DENIED),
    # an unreachable robots.txt refuses the whole origin, and says so: it is not a disallow rule
    ("https://app.example/main.js", {"robots": lambda u: RobotsAnswer.UNAVAILABLE}, Refusal.ROBOTS_UNAVAILABLE),
    ("https://app.example:8443/x", {"robots": lambda u: RobotsAnswer.UNKNOWN}, Refusal.ROBOTS_UNKNOWN),
    ("https://app.example/main.js", {"sent": 30}, Refusal.BUDGET),
    ("https://app.example/main.js", {"sent": 29}, None),
]


@pytest.mark.parametrize("url,kw,refusal", REQUESTS)
def test_each_browser_request_is_judged_by_squall_rules(url, kw, refusal):
    assert judge(url, **kw) is refusal


def test_byDomain_makes_other_hosts_of_the_registered_domain_the_same_site():
    page = "https://www.shop.co.uk/basket"
    assert judge("https://static.shop.co.uk/lib.js", mode="byDomain", page=page) is None
    assert judge("https://static.shop.co.uk/lib.js", mode="byHost", page=page) is Refusal.OTHER_SITE
    assert judge("https://static.other.co.uk/lib.js", mode="byDomain", page=page) is Refusal.OTHER_SITE


@pytest.mark.parametrize("url,host", [("http://10.0.0.1/x", "10.0.0.1"),
                                      ("http://169.254.169.254/latest/meta-data", "169.254.169.254"),
                                      ("http://[::1]/x", "::1"), ("http://127.0.0.1:9/x", "127.0.0.1")])
def test_a_listed_extra_host_at_a_private_address_is_refused_before_robots_is_asked(url, host):
    asked: list[str] = []
    cfg = config(**{"render.requests.hosts.allow": [host]})
    assert judge(url, cfg=cfg, robots=lambda u: asked.append(u) or RobotsAnswer.ALLOWED) is Refusal.BLOCKED_ADDRESS
    assert asked == []


def test_a_listed_extra_host_is_still_under_robots_and_the_budget():
    cfg = config(**{"render.requests.hosts.allow": ["cdn.example"], "render.max.requests": 2})
    assert judge("https://cdn.example/a.js", cfg=cfg) is None
    assert judge("https://cdn.example/a.js", cfg=cfg, robots=lambda u: RobotsAnswer.UNKNOWN) is Refusal.ROBOTS_UNKNOWN
    assert judge("https://cdn.example/a.js", cfg=cfg, sent=2) is Refusal.BUDGET


def test_a_budget_of_zero_refuses_every_request():
    assert judge("https://app.example/main.js", cfg=config(**{"render.max.requests": 0})) is Refusal.BUDGET


@pytest.mark.parametrize("key,value", [("render.timeout", 0.0), ("render.idle.secs", -1.0), ("render.pool.size", 0),
                                       ("render.max.requests", -1), ("render.resources.skip", ["pictures"]),
                                       ("render.resources.skip", ["document"]), ("render.cache.size", -1)])
def test_a_bad_render_setting_fails_at_start_naming_its_key(key, value):
    with pytest.raises(ConfigError) as err:
        load_settings(overrides={key: value})
    assert err.value.key == key


@pytest.mark.parametrize("kind,status,headers,expected", [
    ("script", 200, [], True),
    ("stylesheet", 200, [("Cache-Control", "max-age=60")], True),
    ("script", 200, [("Cache-Control", "no-store")], False),
    ("script", 200, [("cache-control", "private, max-age=9")], False),
    ("script", 200, [("Pragma", "no-cache")], False),
    ("script", 404, [], False),
    ("fetch", 200, [], False),  # a page's data is never reused
    ("xhr", 200, [], False),
])
def test_only_plain_200_scripts_and_stylesheets_are_cacheable(kind, status, headers, expected):
    assert cacheable(kind, status, headers) is expected


def test_the_cache_forgets_entries_after_the_ttl_and_the_oldest_past_its_byte_bound():
    cache = SubresourceCache(max_bytes=10, ttl_s=60.0)
    assert cache.put("a", "A", 4, now_s=0.0) and cache.put("b", "B", 4, now_s=1.0)
    assert cache.get("a", now_s=2.0) == "A"  # a is now the most recently used
    assert cache.put("c", "C", 4, now_s=3.0)  # 12 bytes > 10: b (least recently used) goes
    assert cache.get("b", now_s=3.0) is None and cache.get("a", now_s=3.0) == "A"
    assert cache.get("a", now_s=60.0) is None  # 60 s old
    assert not cache.put("big", "X", 11, now_s=0.0)
    assert not SubresourceCache(0, 60.0).put("a", "A", 1, now_s=0.0)  # off


def test_the_outcome_becomes_parse_render_metadata():
    ok = RenderOutcome(html="<html></html>", failure=None, sent=3, refused={"other_site": 2, "budget": 0}, elapsed_s=1.0)
    assert ok.metadata() == {"parse.render": ["rendered"], "parse.render.requests": ["3"],
                             "parse.render.refused": ["budget=0", "other_site=2"]}
    failed = RenderOutcome(html=None, failure=RenderFailure.TIMEOUT, sent=1, refused={}, elapsed_s=20.0)
    assert failed.metadata()["parse.render"] == ["failed", "render.timeout"]


# ---------------------------------------------------------------- what the robots cache says of a browser request


def _robots_known(kind: str, text: str = "", expires_in_s: float = 3600.0, unreachable: bool = False):
    from squall.policy.robots_rules import RobotsConfig, RobotsKind
    from squall.policy.robots_status import RobotsEntry, RobotsFetchOutcome, decide

    config = RobotsConfig.from_settings(load_settings())
    if unreachable:
        entry = decide(RobotsFetchOutcome(status=None), None, 1000.0, config)
    else:
        entry = RobotsEntry(kind=RobotsKind(kind), robots_text=text, fetched_at_s=990.0, expires_at_s=1000.0 + expires_in_s)
    return entry, entry.rules(config)


def test_the_robots_answer_of_a_browser_request_follows_the_cached_robots_txt() -> None:
    from squall.policy.render_policy import robots_answer

    rules = _robots_known("rules", "User-agent: *\nDisallow: /private\n")
    assert robots_answer(rules, "https://example.com/ok", 1000.0) is RobotsAnswer.ALLOWED
    assert robots_answer(rules, "https://example.com/private/x", 1000.0) is RobotsAnswer.DENIED
    assert robots_answer(None, "https://example.com/ok", 1000.0) is RobotsAnswer.UNKNOWN
    stale = _robots_known("rules", "User-agent: *\nAllow: /\n", expires_in_s=-1.0)
    assert robots_answer(stale, "https://example.com/ok", 1000.0) is RobotsAnswer.UNKNOWN  # never fetched here
    assert robots_answer(_robots_known("", unreachable=True), "https://example.com/ok", 1000.0) is (
        RobotsAnswer.UNAVAILABLE
    )
