"""Tests of squall.policy.url_view: the fields reports count, read from a stored URL record."""

from __future__ import annotations

from squall.policy.reasons import Reason, Status
from squall.policy.schedule import UrlRecord
from squall.policy.url_view import UrlView, url_view

NOW = 1_700_000_000.0


def test_the_view_of_a_stored_record_has_the_records_values():
    record = UrlRecord(url="https://a.example/x", key="a.example", status=Status.FETCH_ERROR, next_fetch_at_s=NOW + 5,
                       last_fetch_at_s=NOW, discovered_at_s=NOW - 60, reason=Reason.HTTP_SERVER_ERROR,
                       metadata={"parse.render": ["rendered"]})
    assert url_view(record.to_dict()) == UrlView(key="a.example", status="FETCH_ERROR", reason=Reason.HTTP_SERVER_ERROR.value,
                                                 next_fetch_at_s=NOW + 5, last_fetch_at_s=NOW, discovered_at_s=NOW - 60,
                                                 metadata={"parse.render": ["rendered"]})


def test_a_record_of_another_shape_is_counted_as_it_is_never_refused():
    assert url_view({}) == UrlView(key=None, status="?", reason=None, next_fetch_at_s=None, last_fetch_at_s=None,
                                   discovered_at_s=0.0, metadata={})
    assert url_view({"status": "LATER", "reason": ""}).status == "LATER"
    assert url_view({"status": "LATER", "reason": ""}).reason is None
