"""squall.policy.admission: seeding, the parse step's refusal counts and exact dedup, before URLs are applied."""

from __future__ import annotations

import pytest

from squall.policy.admission import news_for_known, nothing_if_known, seeded, with_refusals, left_to_send
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


STORED = {"https://a.example/1", "https://a.example/2", "https://b.example/1"}


def _known(url: str, partition: int) -> bool:
    return url in STORED


def _partition(url: str) -> int:
    return 0 if "a.example" in url else 1


def _none(url: str, partition: int, depth: int) -> Reason | None:
    return None


def _offsite(url: str, partition: int, depth: int) -> Reason | None:
    return Reason.SCOPE_HOST if "offsite" in url else None


def _send(batches: list[StatusMessage], refused=_none) -> tuple[list[StatusMessage], dict[Reason, int]]:
    return left_to_send(batches, known=_known, refused=refused, partition_of=_partition)


def test_known_links_are_left_out_of_their_batch_and_the_order_is_kept() -> None:
    batch = StatusMessage(
        url="https://a.example/1", more_urls=["https://a.example/3", "https://a.example/2", "https://a.example/4"]
    )
    (out,), refusals = _send([batch])
    assert out.url == "https://a.example/3" and out.more_urls == ["https://a.example/4"] and refusals == {}


def test_a_batch_of_unknown_links_is_the_same_message() -> None:
    batch = StatusMessage(url="https://a.example/5", more_urls=["https://a.example/6"])
    assert _send([batch])[0][0] is batch


def test_a_batch_whose_links_are_all_known_is_dropped() -> None:
    batches = [StatusMessage(url="https://b.example/1"), StatusMessage(url="https://a.example/7")]
    assert [m.url for m in _send(batches)[0]] == ["https://a.example/7"]


def test_links_refused_here_are_counted_and_not_sent() -> None:
    batches = [
        StatusMessage(
            url="https://offsite-1.example/x", more_urls=["https://a.example/8", "https://offsite-2.example/y"]
        ),
        StatusMessage(url="https://offsite-3.example/z"),
    ]
    out, refusals = _send(batches, _offsite)
    assert [(m.url, m.more_urls) for m in out] == [("https://a.example/8", [])]
    assert refusals == {Reason.SCOPE_HOST: 3}


def test_refusal_counts_still_go_out_on_a_known_link_when_every_link_is_known() -> None:
    batch = StatusMessage(
        url="https://a.example/1", more_urls=["https://a.example/2"], rejected={"a.example": {Reason.TRAP_DEPTH: 2}}
    )
    (out,), refusals = _send([batch])
    assert out.url == "https://a.example/1" and out.more_urls == [] and out.rejected == batch.rejected
    assert refusals == {}


def test_a_refused_first_link_carrying_refusal_counts_is_sent_and_counted_only_there() -> None:
    batch = StatusMessage(
        url="https://offsite-1.example/x",
        more_urls=["https://offsite-2.example/y"],
        rejected={"offsite-9.example": {Reason.TRAP_DEPTH: 1}},
    )
    (out,), refusals = _send([batch], _offsite)
    assert out.url == "https://offsite-1.example/x" and out.more_urls == [] and out.rejected == batch.rejected
    assert refusals == {Reason.SCOPE_HOST: 1}  # offsite-2 here; offsite-1 by the status updater


def test_a_sitemap_batch_is_kept_whole_as_a_known_url_may_learn_from_it() -> None:
    batch = StatusMessage(url="https://a.example/1", metadata={"isSitemap": ["true"]})
    assert _send([batch], _offsite) == ([batch], {})


def test_the_partition_is_asked_once_per_batch_and_passed_on_with_the_depth() -> None:
    asked: list[tuple[str, int, int]] = []
    batch = StatusMessage(url="https://b.example/2", more_urls=["https://b.example/3"], depth=4)
    _send([batch], lambda u, p, d: asked.append((u, p, d)))
    assert asked == [("https://b.example/2", 1, 4), ("https://b.example/3", 1, 4)]


def test_a_link_refused_for_its_host_is_not_looked_up_in_the_urls_table() -> None:
    looked_up: list[str] = []

    def known(url: str, partition: int) -> bool:
        looked_up.append(url)
        return url in STORED

    batch = StatusMessage(url="https://offsite-1.example/x", more_urls=["https://a.example/1", "https://a.example/9"])
    out, refusals = left_to_send([batch], known=known, refused=_offsite, partition_of=_partition)
    assert looked_up == ["https://a.example/1", "https://a.example/9"]
    assert [(m.url, m.more_urls) for m in out] == [("https://a.example/9", [])] and refusals == {Reason.SCOPE_HOST: 1}
