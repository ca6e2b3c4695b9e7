"""squall.worker.table_codec.TableJson: Faust's json bytes (Python's json, not orjson), one encoding per table write."""

from __future__ import annotations

import json

from faust.utils.json import JSONEncoder
from hypothesis import given, settings
from hypothesis import strategies as st

from squall.policy.frontier import HostRecord
from squall.worker.table_codec import TableJson


def faust_json(value) -> bytes:  # faust.utils.json.dumps where orjson is not installed
    return json.dumps(value, cls=JSONEncoder, separators=(",", ":")).encode()


SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=500, deadline=None)
@given(VALUES)
def test_the_bytes_are_faust_jsons_and_read_back_as_json_reads_them(value) -> None:
    codec = TableJson()
    data = codec.dumps(value)
    assert data == faust_json(value)
    assert repr(codec.loads(data)) == repr(json.loads(data))  # NaN, infinities and big integers included


def test_the_second_encoding_of_one_write_is_the_first_and_a_later_write_is_encoded_again() -> None:
    codec = TableJson()
    record = HostRecord(key="a.org", in_flight={"http://a.org/": 1.0}).to_dict()
    first = codec.dumps(record)
    assert codec.dumps(record) is first  # the changelog's and the store's halves of one write
    record["url_count"] = 7  # changed in place and written again: encoded again
    again = codec.dumps(record)
    assert again != first and again == faust_json(record)
    other = dict(record)
    assert codec.dumps(other) == again  # an equal copy is its own write
