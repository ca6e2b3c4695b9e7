"""squall.worker.table_codec.TableJson: JSON that reads back as the value written, one encoding per table write."""

from __future__ import annotations

import json
import math

import orjson
from faust.utils.json import JSONEncoder
from hypothesis import example, given, settings
from hypothesis import strategies as st

from squall.policy.frontier import HostRecord
from squall.policy.schedule import UrlRecord
from squall.worker.table_codec import TableJson


def faust_json(value) -> bytes:  # faust.utils.json.dumps where orjson is not installed
    return json.dumps(value, cls=JSONEncoder, separators=(",", ":")).encode()


SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=1500, deadline=None)
@given(VALUES | st.dictionaries(st.text(max_size=8), VALUES, max_size=6))
@example({"a": math.nan, "b": None})
@example({"a": [math.inf], "b": None})
@example({"a": "null", "b": None, "c": [None]})
@example({"a": 2**64, "b": -(2**63) - 1, "c": 2**63 - 1})
@example({"a": "\ud800", "b": 1e-7, "c": "é"})
def test_a_value_reads_back_as_the_value_faust_s_json_bytes_read_back_as(value) -> None:
    codec = TableJson()
    data = codec.dumps(value)
    assert repr(codec.loads(data)) == repr(json.loads(faust_json(value)))  # NaN, infinities and big integers included
    if data != faust_json(value):  # orjson's bytes, only for a dict (a NaN written null would fail the line above)
        assert type(value) is dict and data == orjson.dumps(value)


def test_records_are_written_by_orjson_and_a_nan_anywhere_by_python_s_json() -> None:
    codec = TableJson()
    url = UrlRecord(url="http://a.org/é", key="a.org", next_fetch_at_s=1_765_000_000.25).to_dict()
    host = HostRecord(key="a.org", in_flight={"http://a.org/": 1.0}).to_dict()
    assert codec.dumps(url) == orjson.dumps(url) and codec.dumps(host) == orjson.dumps(host)
    host["in_flight"]["http://a.org/"] = math.nan
    assert codec.dumps(dict(host)) == faust_json(host)  # not null: read back as NaN
    assert math.isnan(codec.loads(codec.dumps(dict(host)))["in_flight"]["http://a.org/"])


def test_the_second_encoding_of_one_write_is_the_first_and_a_later_write_is_encoded_again() -> None:
    codec = TableJson()
    record = HostRecord(key="a.org", in_flight={"http://a.org/": 1.0}).to_dict()
    first = codec.dumps(record)
    assert codec.dumps(record) is first  # the changelog's and the store's halves of one write
    record["url_count"] = 7  # changed in place and written again: encoded again
    again = codec.dumps(record)
    assert again != first and codec.loads(again) == record
    other = dict(record)
    assert codec.dumps(other) == again  # an equal copy is its own write
