"""squall.policy.codec.loads: json.loads's values and errors, orjson's speed where it reads the text."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from squall.policy.codec import loads

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()  # beyond 64 bits too: orjson refuses them, json reads them
    | st.floats()  # NaN and the infinities: json writes NaN / Infinity, which orjson refuses
    | st.text()  # lone surrogates too
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=16,
)


def _same(a, b) -> bool:  # NaN != NaN: compare the values' spelling, types and order included
    return repr(a) == repr(b) and type(a) is type(b)


@settings(max_examples=1000, deadline=None)
@given(VALUES, st.booleans(), st.sampled_from([None, (",", ":")]))
def test_the_text_of_any_value_reads_as_json_reads_it(value, ascii_only: bool, separators) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, separators=separators)
    expected = json.loads(text)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate written as itself: only a str can carry it
        data = text
    assert _same(loads(data), expected)


@settings(max_examples=2000, deadline=None)
@given(
    st.binary(max_size=40)
    | st.text(alphabet='{}[]",:.-+eE0123456789 \\untrlfasNIiy\ud800\u00e9', max_size=40).map(
        lambda text: text.encode("utf-8", "surrogatepass")
    )
)
def test_any_input_gives_json_loads_value_or_a_refusal_of_the_same_kind(raw) -> None:
    try:
        expected = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        with pytest.raises(RecursionError if isinstance(exc, RecursionError) else ValueError):
            loads(raw)
        return
    assert _same(loads(raw), expected)


@pytest.mark.parametrize(
    "raw",
    [
        b"NaN",
        b"[Infinity,-Infinity]",
        b"1e999",
        b"123456789012345678901234567890",
        b"[-9223372036854775808, 18446744073709551615]",  # orjson's ints: the ends of int64 and uint64
        b"-9223372036854775809",  # 19 digits, beyond int64: a float to orjson
        b'{"a":18446744073709551616}',
        b'"\\ud800"',
        b'{"a":1,"a":2}',
        '{"h":"\u00e9"}'.encode("utf-16"),
        '{"h":"\u00e9"}'.encode("utf-32"),
        b'  {"a" : [1 , 2.5e-05] }  ',
    ],
)
def test_what_orjson_refuses_or_reads_differently_is_json_loads(raw: bytes) -> None:
    assert _same(loads(raw), json.loads(raw))
