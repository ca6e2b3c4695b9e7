"""squall.policy.memo.BoundedMemo: bounded, oldest first, refreshed on write, shared by threads."""

from __future__ import annotations

import threading

import pytest

from squall.policy.memo import BoundedMemo


def test_a_memo_returns_what_was_put_and_none_for_the_rest():
    memo: BoundedMemo[str, int] = BoundedMemo(3)
    memo.put("a", 1)
    assert memo.get("a") == 1 and memo.get("b") is None and len(memo) == 1


def test_the_oldest_entries_go_first_and_a_write_refreshes_a_key():
    memo: BoundedMemo[str, int] = BoundedMemo(3)
    for k, v in [("a", 1), ("b", 2), ("c", 3), ("a", 10), ("d", 4)]:
        memo.put(k, v)
    assert [memo.get(k) for k in "abcd"] == [10, None, 3, 4]
    assert len(memo) == 3


def test_clear_forgets_everything():
    memo: BoundedMemo[str, int] = BoundedMemo(3)
    memo.put("a", 1)
    memo.clear()
    assert memo.get("a") is None and len(memo) == 0


def test_a_memo_needs_room_for_one_entry():
    with pytest.raises(ValueError):
        BoundedMemo(0)


def test_threads_can_share_a_memo():
    memo: BoundedMemo[int, int] = BoundedMemo(5)
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(5000):
                memo.put((i * 3 + n) % 40, i)
                memo.get(i % 40)
        except BaseException as exc:  # noqa: BLE001 (reported by the main thread)
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(memo) <= 5
