"""squall.net.http._checked_target: a plain URL parsed as already encoded is the URL yarl's full parse gives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from yarl import URL

from squall.net.http import _checked_target, _plain
from squall.policy.netsafety import NetworkPolicy
from squall.policy.partition import is_ip_literal

REST = st.text(alphabet="abcAZ09-._~!$&'()*+,;=:@/?%#[] .\u00e9", max_size=25)


def _request_target(url: URL) -> tuple:
    return str(url), url.scheme, url.raw_host, url.port, url.raw_path_qs


@settings(max_examples=3000, deadline=None)
@given(
    st.sampled_from(["http://", "https://", "HTTP://", "ftp://"]),
    st.sampled_from(
        [
            "h.example",
            "H.example",
            "127.0.0.1",
            "a-b.org",
            "x",
            "[::1]",
            "b\u00fccher.de",
            "a..b",
            "-x.org",
            ".",
            "1.2.3.999",
        ]
    ),
    st.sampled_from(["", ":80", ":8080", ":443", ":0", ":99999"]),
    REST,
)
def test_a_plain_url_parsed_as_encoded_is_the_same_request_target(scheme, host, port, rest) -> None:
    url = f"{scheme}{host}{port}/{rest}"
    if _plain(url):
        assert _request_target(URL(url, encoded=True)) == _request_target(URL(url))


def test_plain_urls_are_the_common_ones_and_the_others_take_the_full_parse() -> None:
    assert _plain("http://127.0.0.12:8080/p/17.html")
    assert _plain("https://www.example.org/a/b?x=1&y=two")
    for url in (
        "http://h.example/a%20b",  # percent-encoding: yarl may re-quote it
        "http://h.example/a/./b",  # a dot segment: yarl removes it
        "http://H.example/",  # yarl lower-cases the host
        "http://h.example/a b",
        "http://b\u00fccher.de/",  # IDNA
        "http://[::1]/",
    ):
        assert not _plain(url), url


def test_the_target_of_an_ip_literal_is_judged_and_a_name_is_left_to_the_resolver() -> None:
    policy = NetworkPolicy()
    assert _checked_target("http://h.example/p", policy).raw_host == "h.example"
    assert is_ip_literal("127.0.0.1") and is_ip_literal("::1") and not is_ip_literal("h.example")
    assert not is_ip_literal("127.0.0.1.example")
