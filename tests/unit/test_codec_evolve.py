"""squall.policy.codec.evolve: dataclasses.replace, without __init__ where __init__ only assigns."""

from __future__ import annotations

import dataclasses
import functools

import pytest

from squall.policy.audit import HostAudit
from squall.policy.backoff import BackoffConfig
from squall.policy.codec import evolve
from squall.policy.frontier import HostRecord
from squall.policy.schedule import UrlRecord


@pytest.mark.parametrize(
    ("record", "changes"),
    [
        (HostRecord(key="a.org", in_flight={"http://a.org/": 1.0}), {"next_fetch_at_s": 5.0, "in_flight": {}}),
        (HostAudit(key="a.org"), {"requests": 3, "last_start_s": 2.5}),
        (UrlRecord(url="http://a.org/", key="a.org"), {"depth": 2}),
        (HostRecord(key="a.org"), {}),
    ],
)
def test_evolve_gives_what_replace_gives_and_leaves_the_record_as_it_was(record, changes) -> None:
    before = dataclasses.replace(record)
    new = evolve(record, **changes)
    assert new == dataclasses.replace(record, **changes) and type(new) is type(record)
    assert record == before and new is not record


def test_a_name_that_is_no_field_is_refused_as_replace_refuses_it() -> None:
    with pytest.raises(TypeError, match="no field 'nope'"):
        evolve(HostRecord(key="a.org"), nope=1)


def test_a_dataclass_whose_init_checks_its_values_still_checks_them() -> None:
    config = BackoffConfig(1.0, 60.0, 3600.0)
    with pytest.raises(ValueError, match="max_s"):
        evolve(config, max_s=0.5)  # BackoffConfig.__post_init__


def test_a_cached_property_is_not_copied_stale() -> None:
    @dataclasses.dataclass(frozen=True)
    class Box:
        n: int

        @functools.cached_property
        def double(self) -> int:
            return self.n * 2

    box = Box(1)
    assert box.double == 2
    assert evolve(box, n=5).double == 10
