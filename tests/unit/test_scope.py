"""Scope and trap guards (squall.policy.scope)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from squall.errors import ConfigError
from squall.policy.reasons import Reason
from squall.policy.records import StatusMessage
from squall.policy.scope import LinkJudge, ScopeConfig, batch_outlinks, check, check_link
from squall.policy.traps import TrapConfig
from squall.settings import load_settings
from squall.policy.urls import CanonicalCache, NormalizerConfig
from tests.unit.settings_helper import from_settings

# The defaults file's normalizer with no query parameter removed (each test names what it removes).
NO_REMOVALS = replace(NormalizerConfig.from_settings(load_settings()), query_remove=())

OPEN = ScopeConfig(
    hosts_allow=frozenset(),
    domains_allow=frozenset(),
    schemes=frozenset({"http", "https"}),
    include=(),
    exclude=(),
    max_depth=10,
    max_urls_per_host=100,
    max_query_params=3,
    traps=TrapConfig(max_segment_copies=3, max_run_copies=2, max_host_segments=1, max_query_param_copies=2),
)


def admit(url: str, config: ScopeConfig = OPEN, *, depth: int = 0, host_seeded: bool = True,
          host_url_count: int = 0) -> Reason | None:
    return check(url, depth=depth, host_seeded=host_seeded, host_url_count=host_url_count, config=config)


def settings(**overrides: object) -> dict[str, object]:
    values: dict[str, object] = {
        "urlfilters.hosts.allow": [],
        "urlfilters.domains.allow": [],
        "urlfilters.schemes": ["http", "https"],
        "urlfilters.regex.include": [],
        "urlfilters.regex.exclude": [],
        "urlfilters.max.depth": 10,
        "frontier.max.urls.per.host": 500000,
        "urlfilters.max.query.params": 32,
        "urlfilters.max.repeated.segments": 3,
        "urlfilters.max.repeated.runs": 2,
        "urlfilters.max.host.segments": 1,
        "urlfilters.max.query.param.copies": 2,
    }
    values.update({key.replace("__", "."): value for key, value in overrides.items()})
    return values


# ---------------------------------------------------------------- hosts

def test_without_allow_lists_a_seeded_host_is_in_scope() -> None:
    assert admit("http://example.com/a", host_seeded=True) is None


def test_without_allow_lists_an_unseeded_host_is_out_of_scope() -> None:
    assert admit("http://other.example/a", host_seeded=False) is Reason.SCOPE_HOST


HOST_SCOPE = [
    # (hosts_allow, domains_allow, url, admitted)
    ({"www.example.com"}, set(), "http://www.example.com/", True),
    ({"www.example.com"}, set(), "http://example.com/", False),
    ({"www.example.com"}, set(), "http://sub.www.example.com/", False),
    ({"www.example.com"}, set(), "http://www.example.com:8080/", True),
    (set(), {"example.com"}, "http://example.com/", True),
    (set(), {"example.com"}, "http://a.b.example.com/", True),
    (set(), {"example.com"}, "http://badexample.com/", False),
    (set(), {"example.com"}, "http://example.com.evil.example/", False),
    (set(), {"bbc.co.uk"}, "http://www.bbc.co.uk/news", True),
    (set(), {"bbc.co.uk"}, "http://www.itv.co.uk/", False),
    ({"192.0.2.1"}, {"example.com"}, "http://192.0.2.1:8080/", True),
    ({"192.0.2.1"}, {"example.com"}, "http://192.0.2.2/", False),
    ({"2001:db8::1"}, set(), "http://[2001:db8::1]/", True),
]


@pytest.mark.parametrize(("hosts", "domains", "url", "admitted"), HOST_SCOPE)
def test_allow_lists_admit_hosts_by_name_or_by_domain(hosts: set[str], domains: set[str], url: str,
                                                      admitted: bool) -> None:
    config = replace(OPEN, hosts_allow=frozenset(hosts), domains_allow=frozenset(domains))
    assert admit(url, config, host_seeded=False) is (None if admitted else Reason.SCOPE_HOST)


def test_with_allow_lists_a_seeded_host_outside_them_is_out_of_scope() -> None:
    config = replace(OPEN, hosts_allow=frozenset({"example.com"}))
    assert admit("http://other.example/", config, host_seeded=True) is Reason.SCOPE_HOST


def test_a_scheme_outside_the_configured_ones_is_refused() -> None:
    config = replace(OPEN, schemes=frozenset({"https"}))
    assert admit("http://example.com/", config) is Reason.URL_SCHEME


def test_a_url_without_host_is_refused_not_raised() -> None:
    assert admit("http:///path") is Reason.URL_HOST
    assert admit("http://[broken/") is Reason.URL_HOST


# ---------------------------------------------------------------- regular expressions

def test_include_patterns_admit_only_matching_urls() -> None:
    config = replace(OPEN, include=(re.compile(r"^https?://[^/]+/docs/"), re.compile(r"\.html$")))
    assert admit("http://example.com/docs/a", config) is None
    assert admit("http://example.com/b/page.html", config) is None
    assert admit("http://example.com/blog/a", config) is Reason.SCOPE_REGEX


def test_exclude_patterns_refuse_matching_urls_even_when_included() -> None:
    config = replace(OPEN, include=(re.compile("example"),), exclude=(re.compile(r"\.(jpg|png)$"),))
    assert admit("http://example.com/a.png", config) is Reason.SCOPE_REGEX
    assert admit("http://example.com/a.html", config) is None


# ---------------------------------------------------------------- traps

@pytest.mark.parametrize(("depth", "expected"), [(0, None), (10, None), (11, Reason.TRAP_DEPTH)])
def test_depth_beyond_max_depth_is_a_trap(depth: int, expected: Reason | None) -> None:
    assert admit("http://example.com/", depth=depth) is expected


def test_unlimited_depth_admits_any_depth() -> None:
    assert admit("http://example.com/", replace(OPEN, max_depth=-1), depth=10_000) is None


@pytest.mark.parametrize(("count", "expected"), [(0, None), (99, None), (100, Reason.TRAP_HOST_CAP),
                                                 (5000, Reason.TRAP_HOST_CAP)])
def test_host_cap_refuses_once_the_host_holds_max_urls(count: int, expected: Reason | None) -> None:
    assert admit("http://example.com/", host_url_count=count) is expected


def test_unlimited_host_cap_admits_any_count() -> None:
    assert admit("http://example.com/", replace(OPEN, max_urls_per_host=-1), host_url_count=10**9) is None


@pytest.mark.parametrize(("query", "expected"), [
    ("", None),
    ("?a=1&b=2&c=3", None),
    ("?a=1&a=1&b=1", None),
    ("?a=1&b=2&c=3&d=4", Reason.TRAP_QUERY_PARAMS),
    ("?a&b&c&d", Reason.TRAP_QUERY_PARAMS),
])
def test_more_query_parameters_than_allowed_is_a_trap(query: str, expected: Reason | None) -> None:
    assert admit("http://example.com/p" + query) is expected


def test_unlimited_query_parameters_admit_any_number() -> None:
    url = "http://example.com/?" + "&".join(f"p{i}=1" for i in range(100))
    assert admit(url, replace(OPEN, max_query_params=-1)) is None


@pytest.mark.parametrize(("path", "expected"), [
    ("/a/b/a/b", None),
    ("/a/b/a/b/a/b", Reason.TRAP_REPEATED_RUN),
    ("/img/img/img/img/x.png", Reason.TRAP_REPEATED_SEGMENTS),
    ("/x/shop.example/x/shop.example/", Reason.TRAP_HOST_SEGMENT),
    ("/2024/01/02/03/04/05/06/07/08/09/10/11/12/13/14/15/16/17/18/19/20", None),
    ("/docs/v1/api/guide/intro/setup/install/linux/debian/bookworm/amd64/", None),
])
def test_a_path_repeating_more_than_allowed_is_a_trap_and_deep_distinct_paths_are_not(
        path: str, expected: Reason | None) -> None:
    assert admit("http://example.com" + path) is expected


def test_a_query_repeating_one_parameter_name_is_a_trap() -> None:
    assert admit("http://example.com/list?p=1&p=1") is None
    assert admit("http://example.com/list?p=1&p=1&p=1") is Reason.TRAP_REPEATED_QUERY_PARAM


def test_the_host_cap_is_checked_after_the_permanent_refusals() -> None:
    assert admit("http://other.example/", host_seeded=False, host_url_count=10**6) is Reason.SCOPE_HOST
    assert admit("http://example.com/", depth=99, host_url_count=10**6) is Reason.TRAP_DEPTH


# ---------------------------------------------------------------- configuration

def test_config_is_read_from_the_settings_keys() -> None:
    config = from_settings(ScopeConfig, settings(
        urlfilters__hosts__allow=["WWW.Example.com."], urlfilters__domains__allow=["Bücher.example"],
        urlfilters__regex__include=["^https://"], urlfilters__regex__exclude=[r"\.pdf$"],
        urlfilters__max__depth=-1, frontier__max__urls__per__host=7, urlfilters__max__query__params=0,
        urlfilters__max__repeated__segments=2, urlfilters__max__repeated__runs=-1,
        urlfilters__max__host__segments=3, urlfilters__max__query__param__copies=4, urlfilters__schemes=["HTTPS"]))
    assert config.hosts_allow == {"www.example.com"}
    assert config.domains_allow == {"xn--bcher-kva.example"}
    assert config.schemes == {"https"}
    assert [p.pattern for p in config.include] == ["^https://"]
    assert [p.pattern for p in config.exclude] == [r"\.pdf$"]
    assert (config.max_depth, config.max_urls_per_host, config.max_query_params) == (-1, 7, 0)
    assert config.traps == TrapConfig(max_segment_copies=2, max_run_copies=-1, max_host_segments=3,
                                      max_query_param_copies=4)


def test_default_settings_build_an_open_config() -> None:
    config = from_settings(ScopeConfig, settings())
    assert not config.hosts_allow and not config.domains_allow and not config.include


@pytest.mark.parametrize("key", ["urlfilters.regex.include", "urlfilters.regex.exclude"])
def test_a_bad_regular_expression_names_its_key(key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        from_settings(ScopeConfig, settings(**{key.replace(".", "__"): ["ok", "(unclosed"]}))
    assert caught.value.key == key


@pytest.mark.parametrize("domain", ["com", "co.uk", "CO.UK."])
def test_a_public_suffix_as_allowed_domain_is_a_config_error(domain: str) -> None:
    with pytest.raises(ConfigError) as caught:
        from_settings(ScopeConfig, settings(urlfilters__domains__allow=[domain]))
    assert caught.value.key == "urlfilters.domains.allow"


def test_a_private_domain_without_public_suffix_may_be_allowed() -> None:
    config = from_settings(ScopeConfig, settings(urlfilters__domains__allow=["corp.internal", "localhost"]))
    assert admit("http://wiki.corp.internal/", config, host_seeded=False) is None


@pytest.mark.parametrize(("key", "value"), [
    ("urlfilters.max.depth", -2),
    ("frontier.max.urls.per.host", -5),
    ("urlfilters.max.query.params", -2),
    ("urlfilters.max.repeated.segments", 0),
    ("urlfilters.max.repeated.runs", 0),
    ("urlfilters.max.host.segments", -2),
    ("urlfilters.max.query.param.copies", 0),
])
def test_limits_out_of_range_name_their_key(key: str, value: int) -> None:
    with pytest.raises(ConfigError) as caught:
        from_settings(ScopeConfig, settings(**{key.replace(".", "__"): value}))
    assert caught.value.key == key


def test_allow_lists_spell_idn_hosts_as_canonical_urls_do_with_idna_2008() -> None:
    config = from_settings(ScopeConfig, settings(urlfilters__hosts__allow=["Faß.de"]))
    assert config.hosts_allow == {"xn--fa-hia.de"}
    assert admit("http://xn--fa-hia.de/", config, host_seeded=False) is None
    assert admit("http://fass.de/", config, host_seeded=False) is Reason.SCOPE_HOST


# ---------------------------------------------------------------- check_link (no host record needed)

@pytest.mark.parametrize("url, depth, expected", [
    ("https://example.com/a", 10, None),
    ("ftp://example.com/a", 0, Reason.URL_SCHEME),
    ("https:///a", 0, Reason.URL_HOST),
    ("https://example.com/a", 11, Reason.TRAP_DEPTH),
    ("https://example.com/a?a=1&b=2&c=3&d=4", 0, Reason.TRAP_QUERY_PARAMS),
    ("https://example.com/x/x/x/x", 0, Reason.TRAP_REPEATED_SEGMENTS),
    # host-dependent guards are not check_link's: an unseeded host, a full host
    ("https://elsewhere.example.net/a", 0, None),
])
def test_check_link_applies_only_the_guards_that_need_no_host_record(url, depth, expected):
    assert check_link(url, depth=depth, config=OPEN) is expected


def test_check_link_applies_the_include_and_exclude_expressions():
    config = replace(OPEN, include=(re.compile(r"/docs/"),), exclude=(re.compile(r"\.pdf$"),))
    assert check_link("https://example.com/docs/a", depth=0, config=config) is None
    assert check_link("https://example.com/blog/a", depth=0, config=config) is Reason.SCOPE_REGEX
    assert check_link("https://example.com/docs/a.pdf", depth=0, config=config) is Reason.SCOPE_REGEX


@pytest.mark.parametrize("url, expected", [
    ("https://example.com/a", None),
    ("https://docs.example.org/a", None),            # below an allowed domain
    ("https://elsewhere.example.net/a", Reason.SCOPE_HOST),
    ("https://127.0.0.1/a", Reason.SCOPE_HOST),       # an address is never below a domain
])
def test_check_link_applies_the_host_allow_lists_which_need_no_host_record(url, expected):
    config = replace(OPEN, hosts_allow=frozenset({"example.com"}), domains_allow=frozenset({"example.org"}))
    assert check_link(url, depth=0, config=config) is expected
    assert admit(url, config, host_seeded=False) is expected  # the status updater's full check agrees


@pytest.mark.parametrize("url, depth", [
    ("https://example.com/a", 10), ("https://example.com/a", 11), ("https://example.com/x/x/x/x", 0),
    ("https://example.com/a?a=1&b=2&c=3&d=4", 2), ("ftp://example.com/", 0),
])
def test_check_link_agrees_with_check_for_a_seeded_host_with_room(url, depth):
    assert check_link(url, depth=depth, config=OPEN) is admit(url, depth=depth)


# ---------------------------------------------------------------- batch_outlinks

CANON = CanonicalCache(NO_REMOVALS)


def batch(links: list[str], depth: int = 1, config: ScopeConfig = OPEN, page: str = "https://a.example/",
          partitions: int = 4) -> list[StatusMessage]:
    # with 4 partitions: a.example -> 2, b.example -> 1, c.example -> 0; with 2: a and c -> 0, b -> 1
    return batch_outlinks(links, page_url=page, depth=depth, metadata={"k": ["v"]}, canonical=CANON,
                          mode="byHost", partitions=partitions, judge=LinkJudge(config))


def test_outlinks_go_out_as_one_message_per_partition_in_order_of_first_appearance():
    out = batch(["https://a.example/1", "https://b.example/1", "https://A.example/2#x", "https://a.example/1",
                 "https://a.example/", "mailto:x@y.z", "https://b.example/2"])
    assert [(m.url, m.more_urls, m.rejected, m.depth, m.metadata) for m in out] == [
        ("https://a.example/1", ["https://a.example/2"], {}, 1, {"k": ["v"]}),
        ("https://b.example/1", ["https://b.example/2"], {}, 1, {"k": ["v"]}),
    ]


def test_hosts_of_one_partition_share_one_message():
    out = batch(["https://a.example/1", "https://b.example/1", "https://c.example/1"], partitions=2)
    assert [m.urls() for m in out] == [["https://a.example/1", "https://c.example/1"], ["https://b.example/1"]]


def test_links_refused_whatever_their_host_are_counted_per_key_and_reason_and_not_sent():
    out = batch(["https://a.example/ok", "https://a.example/x/x/x/x", "https://a.example/q?a&b&c&d",
                 "https://a.example/y/y/y/y", "https://c.example/z/z/z/z"], partitions=2)
    assert len(out) == 1
    assert out[0].urls() == ["https://a.example/ok"]
    assert out[0].rejected == {"a.example": {"trap.repeated_segments": 2, "trap.query_params": 1},
                               "c.example": {"trap.repeated_segments": 1}}


def test_a_partition_whose_links_are_all_refused_sends_its_first_link_for_the_status_updater_to_check_and_count():
    out = batch(["https://a.example/1", "https://a.example/2", "https://a.example/3"], depth=11)
    assert len(out) == 1
    assert out[0].urls() == ["https://a.example/1"]
    assert out[0].rejected == {"a.example": {"trap.depth": 2}}  # the third refusal is the status updater's
    assert admit(out[0].url, depth=out[0].depth) is Reason.TRAP_DEPTH


def test_a_page_without_crawlable_links_sends_nothing():
    assert batch(["mailto:a@b.c", "javascript:void(0)", "https://a.example/"]) == []


def test_batches_survive_the_status_topic_encoding():
    for msg in batch(["https://a.example/1", "https://a.example/2", "https://a.example/x/x/x/x"]):
        assert StatusMessage.from_bytes(msg.to_bytes()) == msg


@pytest.mark.parametrize("url", [
    "https://example.com/a", "ftp://example.com/", "https://example.com/x/x/x/x", "https://example.com/q?a&b&c&d",
    "https:///a",
])
def test_the_link_judge_gives_check_links_answer_at_every_depth_from_one_memoized_verdict(url):
    judge = LinkJudge(OPEN)
    for depth in (0, 10, 11, 3, 12):
        assert judge(url, depth) is check_link(url, depth=depth, config=OPEN)


SCOPES = [
    OPEN,
    replace(OPEN, hosts_allow=frozenset({"a.example"}), domains_allow=frozenset({"b.example"}), max_depth=-1),
    replace(OPEN, include=(re.compile(r"/keep"),), exclude=(re.compile(r"\?"),), max_urls_per_host=-1),
    replace(OPEN, schemes=frozenset({"https"}), max_query_params=-1, max_urls_per_host=0),
]
_SEGMENTS = st.sampled_from(["a", "b", "keep", "x", "shop.example", "index.html", "WWW.B.EXAMPLE", ""])
_URLS = st.one_of(
    st.builds(
        lambda scheme, host, path, query: f"{scheme}://{host}/{'/'.join(path)}" + (f"?{query}" if query else ""),
        st.sampled_from(["http", "https", "ftp", "HTTP"]),
        st.sampled_from(["a.example", "x.b.example", "c.example", "A.Example", "127.0.0.1", "[::1]", "", "a.example:8080"]),
        st.lists(_SEGMENTS, max_size=8),
        st.sampled_from(["", "a=1", "a=1&a=2&a=3", "a&b&c&d", "q=%zz"]),
    ),
    st.text(max_size=40),
)


@given(url=_URLS, scope=st.sampled_from(SCOPES), depth=st.integers(0, 12), seeded=st.booleans(),
       count=st.integers(0, 150))
def test_the_link_judge_gives_checks_answer_from_its_memoized_verdict(url, scope, depth, seeded, count):
    judge = LinkJudge(scope)
    judge(url, 0)  # the verdict memoized first, as the parse step leaves it
    for _ in range(2):
        assert judge.check(url, depth=depth, host_seeded=seeded, host_url_count=count) is check(
            url, depth=depth, host_seeded=seeded, host_url_count=count, config=scope)
        assert judge(url, depth) is check_link(url, depth=depth, config=scope)
