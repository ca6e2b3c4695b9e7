"""squall.worker.table_codec.TableJson: Faust's json bytes, one encoding per table write."""

from __future__ import annotations

from faust.serializers import codecs
from hypothesis import given, settings
from hypothesis import strategies as st

import topology
from squall.policy.frontier import HostRecord
from squall.worker.table_codec import TableJson

FAUST_JSON = codecs.get_codec("json")
SCALARS = st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=False) | st.text(max_size=12)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=500, deadline=None)
@given(VALUES)
def test_the_bytes_are_faust_jsons_and_read_back_as_faust_reads_them(value) -> None:
    codec = TableJson()
    data = codec.dumps(value)
    assert data == FAUST_JSON.dumps(value)
    assert codec.loads(data) == FAUST_JSON.loads(data)


def test_the_second_encoding_of_one_write_is_the_first_and_a_later_write_is_encoded_again() -> None:
    codec = TableJson()
    record = HostRecord(key="a.org", in_flight={"http://a.org/": 1.0}).to_dict()
    first = codec.dumps(record)
    assert codec.dumps(record) is first  # the changelog's and the store's halves of one write
    record["url_count"] = 7  # changed in place and written again: encoded again
    again = codec.dumps(record)
    assert again != first and again == FAUST_JSON.dumps(record)
    other = dict(record)
    assert codec.dumps(other) == again  # an equal copy is its own write


def test_every_table_encodes_its_values_with_it_for_its_changelog_and_its_store() -> None:
    for table in (topology.urls_table, topology.hosts_table, topology.robots_table, topology.audit_table):
        assert isinstance(table.value_serializer, TableJson)
