"""Typed exceptions of squall, in one place.

Hierarchy::

    SquallError
    ├── ConfigError            bad or contradictory configuration (names the key)
    ├── InvalidURL             a URL that cannot be crawled (carries a Reason)
    ├── MessageError           a Kafka message that cannot be decoded
    ├── KafkaSetupError        the local broker could not be resolved/started
    │   ├── KafkaAccessError   the broker refused squall's credentials, certificate or an operation (ACLs)
    │   └── UnknownTopic       a topic named on the command line does not exist at the broker
    ├── BrowserMissing         no Chromium executable to render pages with
    ├── DataDirError           the worker's table directory cannot be created or is in use
    ├── SearchIndexError       the search index directory cannot be opened (not an index, or in use)
    └── FetchError             a fetch that failed (carries a Reason)
        └── BlockedAddress     the resolved address is not allowed (SSRF guard)

aiohttp and Kafka client errors are translated into these at one boundary
(squall.net.http for fetching, squall.net.kafka_security for a broker's
refusals, squall.tools.kafka_local for the local broker).
The reasons are :class:`squall.policy.reasons.Reason` members (a ``str``
enum: formatted as its value, ``"url.host"``), never free text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # records imports this module: the enum is only named here, never imported at run time
    from squall.policy.reasons import Reason


class SquallError(Exception):
    """Base class of every error squall raises on purpose."""


class ConfigError(SquallError):
    """Configuration is invalid; ``key`` names the offending key (or None)."""

    def __init__(self, key: str | None, message: str) -> None:
        self.key = key
        super().__init__(f"{key}: {message}" if key else message)


class InvalidURL(SquallError):
    """A URL that cannot be crawled; ``reason`` is a ``Reason`` (``url.*``), ``detail`` a hint for people."""

    def __init__(self, reason: Reason, url: str = "", detail: str = "") -> None:
        self.reason = reason
        self.url = url
        self.detail = detail
        super().__init__(f"{reason}: {url!r}" + (f" ({detail})" if detail else ""))


class MessageError(SquallError):
    """A Kafka message whose bytes are not a valid squall message."""


class KafkaSetupError(SquallError):
    """The local Kafka broker could not be resolved, formatted or started."""


class KafkaAccessError(KafkaSetupError):
    """The broker would not let squall in (SASL authentication, TLS trust) or refused an operation (an ACL).

    The message is one line for people: the user, what was refused and why; never a password.
    """


class UnknownTopic(KafkaSetupError):
    """A topic named on the command line (``squall tail TOPIC``) does not exist; the message names those that do."""


class BrowserMissing(SquallError):
    """No Chromium executable was found (``render.browser.path``, PATH); the message says how to install one."""


class DataDirError(SquallError):
    """The worker's table directory ``path`` cannot be used (created, written, or locked: in use)."""

    def __init__(self, path: object, message: str) -> None:
        self.path = path
        super().__init__(f"data directory {path} {message}")


class SearchIndexError(SquallError):
    """The search index (``index.dir``) cannot be opened: not an index of squall's schema, or its writer is locked."""


class FetchError(SquallError):
    """A fetch that failed; ``reason`` is a :class:`squall.policy.reasons.Reason` (transport or ``url.*``)."""

    def __init__(self, reason: Reason, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}" if detail else reason)


class Fenced(SquallError):
    """A request not made: the group membership ended while the fence held it (squall.policy.lease)."""


class BlockedAddress(FetchError):
    """The host resolved to an address outside the allowed networks (SSRF guard)."""
