"""The one reader of a stored URL record for reports over every URL (pure).

``squall status``, the dashboard and ``/metrics`` count URL records by
status, host and due time; building a :class:`squall.policy.schedule.UrlRecord`
for each of a million URLs would cost seconds, so they read the few fields
they count through :func:`url_view` instead (a :class:`UrlView`), which knows
the stored shape (:meth:`squall.policy.schedule.UrlRecord.to_dict`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple


class UrlView(NamedTuple):
    """The fields of a stored URL record that reports count, read without building a :class:`UrlRecord`.

    ``status`` and ``reason`` are the stored values (a value squall does not
    know is counted as it is, never refused); ``key`` is None when the record
    has none. Times are Unix seconds.
    """

    key: str | None
    status: str
    reason: str | None
    next_fetch_at_s: float | None
    last_fetch_at_s: float | None
    discovered_at_s: float
    metadata: Mapping[str, Any]


def url_view(d: Mapping[str, Any]) -> UrlView:
    """The :class:`UrlView` of a urls-table value (a :meth:`UrlRecord.to_dict` dict): reports over every URL
    (``squall status``, the dashboard, ``/metrics``) read it this way, at a few dict lookups per URL."""
    get = d.get
    return UrlView(
        get("key"),
        get("status", "?"),
        get("reason") or None,
        get("next_fetch_at_s"),
        get("last_fetch_at_s"),
        get("discovered_at_s") or 0.0,
        get("metadata") or {},
    )
