"""The robots settings, config and rules maker that the squall.policy.robots_* tests share."""

from __future__ import annotations

from dataclasses import replace

from squall.policy.robots_rules import RobotsConfig, RobotsRules
from squall.settings import load_settings

SETTINGS = load_settings(
    overrides={
        "http.agent.name": "FooBot",
        "http.robots.agents": [],
        "http.robots.content.limit": 512_000,
        "http.robots.403.allow": True,
        "http.robots.5xx.allow": False,
        "http.robots.cache.ttl.secs": 86_400,
        "http.robots.refresh.ahead.secs": 600,
        "http.robots.retry.base.secs": 60.0,
        "http.robots.retry.max.secs": 3600.0,
        "http.robots.unreachable.grace.secs": 2_592_000,
        "fetcher.max.crawl.delay": 30.0,
        "fetcher.max.crawl.delay.force": False,
    }
)
CONFIG = RobotsConfig.from_settings(SETTINGS)


def config(**changes) -> RobotsConfig:
    return replace(CONFIG, **changes)


def rules_for(text: str, *agents: str) -> RobotsRules:
    return RobotsRules.from_text(text, agents or CONFIG.agents)
