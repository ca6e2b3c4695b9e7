"""The tables' value codec: Faust's ``json`` bytes, each value encoded once per table write.

A Faust table write (``table[key] = value``) encodes ``value`` twice with the
table's value serializer: once for its changelog record
(``Table.on_key_set`` → ``send_changelog``) and once for its local store
(``SerializedStore.__setitem__``), one right after the other. With Faust's
``json`` codec that is two JSON encodings of every host, URL and audit record
a page writes. :class:`TableJson` writes the bytes that codec writes with
Python's ``json`` (``faust.utils.json.dumps``: compact separators, ASCII
escapes) from one encoder built once, and hands the second call of the same
write the bytes of the first. Faust's codec writes with orjson instead when
orjson is installed (it is: :func:`squall.policy.codec.loads` reads with it),
which would change the bytes and write a ``NaN`` or an infinity as ``null``;
the tables keep Python's bytes. Reads give ``json.loads``'s values
(:func:`squall.policy.codec.loads`).
"""

from __future__ import annotations

from typing import Any

from faust.serializers.codecs import Codec
from faust.utils.json import JSONEncoder

from squall.policy.codec import loads

_ENCODER = JSONEncoder(separators=(",", ":"))  # what faust.utils.json.dumps builds on every call without orjson


class TableJson(Codec):
    """Faust's ``json`` codec for one table's values, with the second encoding of a write taken from the first.

    The bytes of the last value encoded are kept with the value itself (a
    reference, so no other object can be taken for it) and handed out once,
    to the next call for that same object: the other half of the same table
    write. A value encoded again later (a record changed in place and
    written again) is encoded again. Faust calls it from the event loop
    only (table writes happen inside an event).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._last: tuple[Any, bytes] | None = None

    def _dumps(self, obj: Any) -> bytes:
        last = self._last
        if last is not None and last[0] is obj:
            self._last = None
            return last[1]
        data = _ENCODER.encode(obj).encode("utf-8")
        self._last = (obj, data)
        return data

    def _loads(self, s: bytes) -> Any:
        return loads(s)
