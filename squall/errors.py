"""Typed exceptions of squall, in one place.

Hierarchy::

    SquallError
    ├── ConfigError            bad or contradictory configuration (names the key)
    ├── InvalidURL             a URL that cannot be crawled (carries a reason)
    ├── MessageError           a Kafka message that cannot be decoded
    ├── KafkaSetupError        the local broker could not be resolved/started
    ├── BrowserMissing         no Chromium executable to render pages with
    ├── DataDirError           the worker's table directory cannot be created or is in use
    └── FetchError             a fetch that failed (carries a FetchFailure reason)
        └── BlockedAddress     the resolved address is not allowed (SSRF guard)

aiohttp and Kafka client errors are translated into these at one boundary
(squall.net.http for fetching, squall.tools.kafka_local for the broker).
"""

from __future__ import annotations


class SquallError(Exception):
    """Base class of every error squall raises on purpose."""


class ConfigError(SquallError):
    """Configuration is invalid; ``key`` names the offending key (or None)."""

    def __init__(self, key: str | None, message: str) -> None:
        self.key = key
        super().__init__(f"{key}: {message}" if key else message)


class InvalidURL(SquallError):
    """A URL that cannot be crawled; ``reason`` is a short machine-readable code, ``detail`` a hint for people."""

    def __init__(self, reason: str, url: str = "", detail: str = "") -> None:
        self.reason = reason
        self.url = url
        self.detail = detail
        super().__init__(f"{reason}: {url!r}" + (f" ({detail})" if detail else ""))


class MessageError(SquallError):
    """A Kafka message whose bytes are not a valid squall message."""


class KafkaSetupError(SquallError):
    """The local Kafka broker could not be resolved, formatted or started."""


class BrowserMissing(SquallError):
    """No Chromium executable was found (``render.browser.path``, PATH); the message says how to install one."""
class DataDirError(SquallError):
    """The worker's table directory ``path`` cannot be used (created, written, or locked: in use)."""

    def __init__(self, path: object, message: str) -> None:
        self.path = path
        super().__init__(f"data directory {path} {message}")


class FetchError(SquallError):
    """A fetch that failed; ``reason`` is a ``squall.policy.records.Reason`` value."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}" if detail else reason)


class BlockedAddress(FetchError):
    """The host resolved to an address outside the allowed networks (SSRF guard)."""
