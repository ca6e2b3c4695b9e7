"""squall.policy.admission: seeding, the parse step's refusal counts and exact dedup, before URLs are applied."""

from __future__ import annotations

import pytest

from squall.policy.admission import news_for_known, nothing_if_known, seeded, with_refusals
from squall.policy.frontier import HostRecord
from squall.policy.records import StatusMessage
from squall.policy.reasons import Reason, Status


def test_a_seed_puts_its_host_in_scope_once() -> None:
    host = seeded(HostRecord(key="example.com"), ["https://example.com/"], by_ip=False)
    assert host.seeded
    assert seeded(host, ["https://example.com/"], by_ip=False) is host  # already seeded: the same record


def test_by_ip_only_the_seeded_names_of_an_address_are_in_scope() -> None:
    host = seeded(HostRecord(key="192.0.2.1"), ["https://a.example/"], by_ip=True)
    assert host.seeded_for("a.example", True) and not host.seeded_for("b.example", True)


def test_refusals_are_counted_per_reason_and_added_up() -> None:
    host = with_refusals(HostRecord(key="example.com"), {Reason.TRAP_DEPTH: 2})
    host = with_refusals(host, {Reason.TRAP_DEPTH: 1})
    assert host.rejected == {Reason.TRAP_DEPTH.value: 3}
    assert with_refusals(host, None) is host and with_refusals(host, {}) is host


@pytest.mark.parametrize(
    ("msg", "nothing"),
    [
        (StatusMessage(url="https://example.com/a"), True),
        (StatusMessage(url="https://example.com/a", metadata={"isSitemap": ["true"]}), False),
        (StatusMessage(url="https://example.com/a", status=Status.FETCHED, fetched_at_s=1.0), False),
        (StatusMessage(url="https://example.com/a", moved={"url": "https://example.com/a"}), False),
    ],
)
def test_only_a_plain_rediscovery_changes_nothing_for_a_known_url(msg: StatusMessage, nothing: bool) -> None:
    assert nothing_if_known(msg) is nothing


@pytest.mark.parametrize(
    ("metadata", "news"),
    [({}, False), ({"sitemap.lastmod": ["2024-01-01T00:00:00Z"]}, True), ({"sitemap.lastmod": ["garbage"]}, False)],
)
def test_a_readable_sitemap_lastmod_is_news_for_a_known_url(metadata: dict[str, list[str]], news: bool) -> None:
    assert news_for_known(StatusMessage(url="https://example.com/a", metadata=metadata)) is news
