"""squall.cli.dashboard.progress and the page it serves (no broker: the numbers come from records)."""

from __future__ import annotations

from squall.cli.dashboard import PAGE, progress

NOW = 1_714_564_800.0


def url(discovered: float, status: str = "DISCOVERED", fetched: float | None = None) -> dict:
    return {"status": status, "discovered_at_s": discovered, "last_fetch_at_s": fetched}


def test_no_urls_no_progress() -> None:
    assert progress({}, NOW) == []


def test_progress_is_cumulative_and_ends_with_the_totals_now() -> None:
    urls = {"a": url(NOW - 100, "FETCHED", NOW - 90), "b": url(NOW - 80, "FETCHED", NOW - 50),
            "c": url(NOW - 60), "d": url(NOW - 10, "ERROR", NOW - 5)}
    points = progress(urls, NOW, points=10)
    assert len(points) == 11
    assert points[0] == {"t": NOW - 100, "discovered": 1, "fetched": 0}
    assert points[-1] == {"t": NOW, "discovered": 4, "fetched": 2}  # an ERROR is discovered, not fetched
    assert [p["t"] for p in points] == sorted(p["t"] for p in points)
    for a, b in zip(points, points[1:]):
        assert b["discovered"] >= a["discovered"] and b["fetched"] >= a["fetched"]
    assert next(p for p in points if p["t"] >= NOW - 50)["fetched"] == 2


def test_urls_discovered_at_one_instant_still_give_a_curve() -> None:
    points = progress({"a": url(NOW), "b": url(NOW)}, NOW, points=4)
    assert points[-1] == {"t": NOW, "discovered": 2, "fetched": 0}


def test_the_page_is_self_contained() -> None:
    html = PAGE.read_text(encoding="utf-8")
    for needle in ("http://", "https://"):
        assert all(part.startswith("www.w3.org/2000/svg") for part in html.split(needle)[1:]), needle
    for element_id in ("total", "st-FETCHED", "violations", "audit-chart", "progress", "hosts", "rejected", "reasons"):
        assert f'id="{element_id}"' in html
