"""Building policy configs from the defaults file plus a few dotted-key overrides, as the worker does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeVar

from squall.settings import Settings, load_settings

T = TypeVar("T", covariant=True)


class FromSettings(Protocol[T]):
    def from_settings(self, settings: Settings, /) -> T: ...


def settings_of(values: Mapping[str, Any]) -> Settings:
    """``values`` if it is a Settings, else the defaults with ``values`` (dotted keys) applied and validated.

    Raises:
        ConfigError: as :func:`squall.settings.load_settings` (the bad key named).
    """
    return values if isinstance(values, Settings) else load_settings(overrides=values)


def from_settings(cls: FromSettings[T], values: Mapping[str, Any]) -> T:
    """``cls.from_settings`` of :func:`settings_of` ``(values)``."""
    return cls.from_settings(settings_of(values))
