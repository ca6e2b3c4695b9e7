"""URL-shape trap guards (squall.policy.traps): repeated segments and runs, host-like segments, query names."""

from __future__ import annotations

import pytest

from squall.policy.reasons import Reason
from squall.policy.traps import TrapConfig, check_path, check_query, is_host_like, max_copies, most_host_segment_copies

DEFAULTS = TrapConfig(max_segment_copies=3, max_run_copies=2, max_host_segments=1, max_query_param_copies=2)
OFF = TrapConfig(max_segment_copies=10**6, max_run_copies=-1, max_host_segments=-1, max_query_param_copies=-1)


def segments(path: str) -> list[str]:
    return path.lstrip("/").split("/")


COPIES = [
    # (path, most consecutive copies of one run of 1..n/2 segments)
    ("/", 1),
    ("/a/b/c/d/e/f/g/h/i/j", 1),
    ("/a/b/a/c/a/d/a", 1),                          # copies that are not back to back
    ("/a/a/a", 3),
    ("/a/b/a/b/a/b", 3),
    ("/x/a/b/c/a/b/c/a/b/c/a/b/c/y", 4),
    ("/a/b/c/d/a/b/c/d/a/b/c/d/a/b/c/d", 4),        # a run of four, looked for since any length is
    ("/p/1/2/3/4/5/6/1/2/3/4/5/6/q", 2),            # a run of six, twice
    ("/cal/2024/01/cal/2024/01/", 2),
    ("/a/a/a/a/a/a", 6),                            # "a/a" x 3 is not counted: its period is "a"
]


@pytest.mark.parametrize(("path", "copies"), COPIES)
def test_max_copies_counts_back_to_back_copies_of_runs_of_any_length(path: str, copies: int) -> None:
    parts = segments(path)
    assert max_copies(parts, 1, max(1, len(parts) // 2)) == copies


def test_max_copies_looks_only_at_the_run_lengths_asked_for() -> None:
    parts = segments("/a/a/a/b/c/b/c")
    assert max_copies(parts, 1, 1) == 3
    assert max_copies(parts, 2, 3) == 2


PATHS = [
    # (path, reason under the defaults: 3 copies of a segment, 2 of a run, 1 of a host-like segment)
    ("/img/img/img/x.png", None),
    ("/img/img/img/img/x.png", Reason.TRAP_REPEATED_SEGMENTS),
    ("/a/b/a/b", None),
    ("/a/b/a/b/a/b", Reason.TRAP_REPEATED_RUN),                       # the third copy is refused
    ("/a/b/c/d/a/b/c/d", None),
    ("/a/b/c/d/a/b/c/d/a/b/c/d", Reason.TRAP_REPEATED_RUN),           # a run of four
    ("/a/b/c/d/e/a/b/c/d/e/a/b/c/d/e/", Reason.TRAP_REPEATED_RUN),
    ("/x/shop.example/", None),
    ("/x/shop.example/x/shop.example/", Reason.TRAP_HOST_SEGMENT),     # a scheme-less link, twice
    ("/www.Example.com/a/www.example.com/b", Reason.TRAP_HOST_SEGMENT),
    ("/docs/index.html/x/index.html", None),                          # a file name, not a host
    ("/v1.2/api/v1.2/", None),                                        # a version, not a host
    ("/2024/01/02/03/04/05/06/07/08/09/10/11/12/13/14/15/16/17/18/19/20", None),
    ("/docs/v1/api/guide/intro/setup/install/linux/debian/bookworm/amd64/", None),
    ("/en/docs/en/blog/en/", None),                                   # a segment again, never back to back
]


@pytest.mark.parametrize(("path", "expected"), PATHS)
def test_check_path_refuses_trap_shapes_and_admits_deep_distinct_paths(path: str, expected: Reason | None) -> None:
    assert check_path(path, DEFAULTS) is expected


@pytest.mark.parametrize("path", ["/a/b/a/b/a/b/a/b", "/x/shop.example/x/shop.example/x/shop.example/"])
def test_guards_set_to_unlimited_admit_everything(path: str) -> None:
    assert check_path(path, OFF) is None


def test_a_larger_run_limit_admits_more_copies() -> None:
    config = TrapConfig(max_segment_copies=3, max_run_copies=3, max_host_segments=-1, max_query_param_copies=-1)
    assert check_path("/a/b/a/b/a/b", config) is None
    assert check_path("/a/b/a/b/a/b/a/b", config) is Reason.TRAP_REPEATED_RUN


def test_a_thousand_segment_path_is_judged_by_its_longest_runs_too() -> None:
    distinct = [f"s{i}" for i in range(1000)]
    assert check_path("/" + "/".join(distinct), DEFAULTS) is None
    twice = distinct + distinct[500:]        # a run of 500 segments, two copies
    assert check_path("/" + "/".join(twice), DEFAULTS) is None
    thrice = distinct[:300] * 3              # a run of 300 segments, three copies
    assert check_path("/" + "/".join(thrice), DEFAULTS) is Reason.TRAP_REPEATED_RUN


@pytest.mark.parametrize(("segment", "host_like"), [
    ("shop.example", True),
    ("www.example.com", True),
    ("WWW.EXAMPLE.COM.", True),
    ("xn--fa-hia.de", True),
    ("index.html", False),
    ("app.min.js", False),
    ("v1.2", False),
    ("10.0.0.1", False),
    ("example", False),
    ("a..b", False),
    ("", False),
])
def test_is_host_like_recognises_dns_names_and_not_file_names(segment: str, host_like: bool) -> None:
    assert is_host_like(segment) is host_like


def test_host_like_segments_are_counted_anywhere_and_case_insensitively() -> None:
    assert most_host_segment_copies(segments("/a/Shop.Example/b/c/shop.example/d")) == 2
    assert most_host_segment_copies(segments("/a/b")) == 0


QUERIES = [
    ("", None),
    ("p=1", None),
    ("p=1&p=2", None),
    ("p=1&p=1&p=1", Reason.TRAP_REPEATED_QUERY_PARAM),
    ("a=1&p=1&b=2&p=2&c=3&p=3", Reason.TRAP_REPEATED_QUERY_PARAM),   # not next to each other
    ("p&p&p", Reason.TRAP_REPEATED_QUERY_PARAM),                     # names without values count too
    ("p%5B%5D=1&p[]=2&p%5b%5d=3", Reason.TRAP_REPEATED_QUERY_PARAM), # one name however escaped
    ("a=1&b=1&c=1&d=1", None),
]


@pytest.mark.parametrize(("query", "expected"), QUERIES)
def test_check_query_refuses_a_parameter_name_over_the_limit(query: str, expected: Reason | None) -> None:
    assert check_query(query, DEFAULTS) is expected


def test_query_guard_set_to_unlimited_admits_repeats() -> None:
    assert check_query("p=1&p=1&p=1&p=1", OFF) is None
