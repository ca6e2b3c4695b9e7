"""Tests of squall.policy.crawl_delay (StormCrawler CrawlDelayPolicy, max-observed-wins)."""

from __future__ import annotations

import itertools
import json

import pytest

from squall.policy.crawl_delay import CrawlDelayConfig, CrawlDelayState, observe_crawl_delay
from squall.errors import ConfigError
from tests.unit.settings_helper import from_settings

CONFIG = CrawlDelayConfig(enabled=True, max_delay_s=86400, decay_s=1800.0)


def state(delay_s, at_s, signal_id=None, observed=None):
    return CrawlDelayState(delay_s=delay_s, max_observed_s=observed or delay_s, max_observed_at_s=at_s, last_signal_id=signal_id)


# ---------------------------------------------------------------- first value, rounding, caps, zero


@pytest.mark.parametrize(
    ("requested_s", "expected_delay_s"),
    [
        (5, 5),
        (5.0, 5),
        (2.1, 3),  # rounded up: never faster than robots.txt
        (0.2, 1),
        (1, 1),
        (86400, 86400),
    ],
)
def test_a_first_signal_sets_the_delay_rounded_up_to_whole_seconds(requested_s, expected_delay_s):
    new = observe_crawl_delay(None, requested_s, at_s=100.0, config=CONFIG, signal_id="m1")
    assert new == CrawlDelayState(delay_s=expected_delay_s, max_observed_s=expected_delay_s, max_observed_at_s=100.0, last_signal_id="m1")


def test_values_above_the_cap_are_capped_and_the_requested_value_is_kept():
    cfg = CrawlDelayConfig(enabled=True, max_delay_s=60, decay_s=1800.0)
    new = observe_crawl_delay(None, 3600.5, 0.0, cfg)
    assert (new.delay_s, new.max_observed_s) == (60, 3601)


def test_a_repeated_over_cap_value_changes_nothing():
    cfg = CrawlDelayConfig(enabled=True, max_delay_s=60, decay_s=1800.0)
    first = observe_crawl_delay(None, 3600, 0.0, cfg)
    assert observe_crawl_delay(first, 5000, 10.0, cfg) is first


@pytest.mark.parametrize("requested_s", [0, 0.0, -3, float("nan"), float("inf"), float("-inf")])
def test_a_zero_negative_or_non_finite_delay_is_never_set(requested_s):
    assert observe_crawl_delay(None, requested_s, 0.0, CONFIG) is None
    current = state(10, 0.0)
    assert observe_crawl_delay(current, requested_s, 5000.0, CONFIG) is current  # even after the window


def test_when_disabled_every_signal_is_ignored():
    cfg = CrawlDelayConfig(enabled=False, max_delay_s=86400, decay_s=1800.0)
    current = state(10, 0.0)
    assert observe_crawl_delay(current, 99, 1.0, cfg) is current
    assert observe_crawl_delay(None, 99, 1.0, cfg) is None


# ---------------------------------------------------------------- max wins, decay window


def test_a_higher_value_replaces_at_once_and_restarts_the_window():
    current = state(10, 0.0)
    new = observe_crawl_delay(current, 20, 100.0, CONFIG, "m2")
    assert new == CrawlDelayState(20, 20, 100.0, "m2")
    # the window now runs from 100: a lower value at 1850 (1750 s later) is ignored
    assert observe_crawl_delay(new, 5, 1850.0, CONFIG) is new


@pytest.mark.parametrize("at_s", [1.0, 900.0, 1799.999])
def test_a_lower_value_inside_the_decay_window_changes_nothing(at_s):
    current = state(10, 0.0)
    assert observe_crawl_delay(current, 5, at_s, CONFIG) is current


@pytest.mark.parametrize("at_s", [1800.0, 5000.0])
def test_a_lower_value_applies_once_the_maximum_has_aged_out(at_s):
    current = state(10, 0.0)
    assert observe_crawl_delay(current, 5, at_s, CONFIG, "m9") == CrawlDelayState(5, 5, at_s, "m9")


def test_a_repeated_value_inside_the_window_is_not_written_again():
    current = state(10, 0.0)
    assert observe_crawl_delay(current, 10, 500.0, CONFIG, "other") is current
    assert observe_crawl_delay(current, 9.5, 500.0, CONFIG) is current  # rounds up to the same 10


def test_a_repeated_value_after_the_window_refreshes_it():
    current = state(10, 0.0)
    new = observe_crawl_delay(current, 10, 2000.0, CONFIG)
    assert new is not current and new.max_observed_at_s == 2000.0 and new.delay_s == 10


def test_a_decay_of_zero_lets_lower_values_apply_at_once():
    cfg = CrawlDelayConfig(enabled=True, max_delay_s=86400, decay_s=0.0)
    current = state(10, 0.0)
    assert observe_crawl_delay(current, 3, 0.5, cfg).delay_s == 3


# ---------------------------------------------------------------- re-delivery (at-least-once Kafka)


def test_the_same_message_applied_twice_changes_nothing_the_second_time():
    first = observe_crawl_delay(None, 7, 10.0, CONFIG, signal_id="p3@42")
    assert observe_crawl_delay(first, 7, 10.0, CONFIG, signal_id="p3@42") is first


def test_the_same_signal_id_is_ignored_even_with_a_different_value():
    first = observe_crawl_delay(None, 7, 10.0, CONFIG, signal_id="p3@42")
    assert observe_crawl_delay(first, 99, 11.0, CONFIG, signal_id="p3@42") is first


def test_the_same_value_and_time_without_an_id_is_idempotent_even_with_no_decay():
    cfg = CrawlDelayConfig(enabled=True, max_delay_s=86400, decay_s=0.0)
    first = observe_crawl_delay(None, 7, 10.0, cfg)
    assert observe_crawl_delay(first, 7, 10.0, cfg) is first


def test_an_old_message_redelivered_after_a_newer_lower_one_was_applied_changes_nothing():
    s1 = observe_crawl_delay(None, 10, 0.0, CONFIG, "m1")
    s2 = observe_crawl_delay(s1, 5, 2000.0, CONFIG, "m2")  # 10 aged out: lowered to 5
    assert s2.delay_s == 5
    assert observe_crawl_delay(s2, 10, 0.0, CONFIG, "m1") is s2


def test_an_old_message_redelivered_after_a_newer_higher_one_changes_nothing():
    s1 = observe_crawl_delay(None, 10, 0.0, CONFIG, "m1")
    s2 = observe_crawl_delay(s1, 20, 100.0, CONFIG, "m2")
    assert observe_crawl_delay(s2, 10, 0.0, CONFIG, "m1") is s2


def test_an_old_lower_signal_never_lowers_even_when_the_current_one_has_aged():
    current = state(10, 5000.0)
    assert observe_crawl_delay(current, 3, 1000.0, CONFIG) is current
    assert observe_crawl_delay(current, 3, 7000.0, CONFIG).delay_s == 3  # a newer one may


def test_an_old_higher_signal_delivered_late_inside_the_window_raises_as_in_order_delivery_would():
    # In order: 10@0 then 5@50 -> 10 (5 inside the window). Out of order must agree.
    s_late = observe_crawl_delay(observe_crawl_delay(None, 5, 50.0, CONFIG, "b"), 10, 0.0, CONFIG, "a")
    s_order = observe_crawl_delay(observe_crawl_delay(None, 10, 0.0, CONFIG, "a"), 5, 50.0, CONFIG, "b")
    assert s_late.delay_s == s_order.delay_s == 10
    assert s_late.max_observed_at_s == s_order.max_observed_at_s == 0.0


def test_an_old_higher_signal_outside_the_window_is_ignored():
    current = state(5, 5000.0)
    assert observe_crawl_delay(current, 10, 1000.0, CONFIG) is current


@pytest.mark.parametrize(
    "signals",
    [
        [(10, 0.0), (5, 50.0), (20, 100.0)],
        [(3, 0.0), (3, 10.0), (4, 1000.0)],
        [(8, 0.0), (2, 900.0), (6, 1700.0)],
    ],
)
def test_any_delivery_order_inside_one_window_ends_at_the_maximum(signals):
    results = set()
    for order in itertools.permutations(signals):
        s = None
        for value, at_s in order:
            s = observe_crawl_delay(s, value, at_s, CONFIG)
            s = observe_crawl_delay(s, value, at_s, CONFIG)  # and each re-delivered at once
        results.add(s.delay_s)
    assert results == {max(v for v, _ in signals)}


# ---------------------------------------------------------------- records and config


def test_state_round_trips_through_json():
    s = CrawlDelayState(12, 15, 1234.5, "p1@9")
    assert CrawlDelayState.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    assert CrawlDelayState.from_dict({}) == CrawlDelayState(None, None, None, None)


def test_from_dict_refuses_wrong_types():
    with pytest.raises(ValueError):
        CrawlDelayState.from_dict({"delay_s": "10"})


# The keys robots pacing needs beside its own (squall.settings.rules, StormCrawler's CrawlDelayPolicy).
SEED_000_CONTRACT = {"frontier.robots.crawl.delay.enabled": True, "fetcher.max.crawl.delay.force": True,
                     "metadata.persist": ["parse.*", "robots.crawl.delay"]}


def test_config_from_settings_reads_the_frontier_robots_keys():
    cfg = from_settings(CrawlDelayConfig,
        {**SEED_000_CONTRACT, "frontier.robots.delay.max.secs": 86400, "frontier.robots.delay.decay.secs": 1800}
    )
    assert cfg == CrawlDelayConfig(True, 86400, 1800.0)


def test_config_out_of_range_names_the_key():
    with pytest.raises(ConfigError) as err:
        from_settings(CrawlDelayConfig,
            {"frontier.robots.crawl.delay.enabled": True, "frontier.robots.delay.max.secs": 0, "frontier.robots.delay.decay.secs": 1800}
        )
    assert err.value.key == "frontier.robots.delay.max.secs"
