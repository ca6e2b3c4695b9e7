"""The tables' value codec: JSON bytes, each value encoded once per table write.

A Faust table write (``table[key] = value``) encodes ``value`` twice with the
table's value serializer: once for its changelog record
(``Table.on_key_set`` → ``send_changelog``) and once for its local store
(``SerializedStore.__setitem__``), one right after the other. :class:`TableJson`
encodes the first and hands the second call of the same write its bytes.

A record (a ``dict``) is written by orjson, about ten times faster than
Python's ``json``, whenever its bytes read back as the value itself
(:func:`squall.policy.codec.loads`); Python's ``json`` writes the rest as
Faust's own ``json`` codec does without orjson (``faust.utils.json.dumps``:
compact separators, ASCII escapes): a ``NaN`` or an infinity anywhere (orjson
would write ``null``), a key that is not a string, an integer beyond 64 bits,
a lone surrogate, a ``str``, ``dict`` or other subclass, and any value that is
not a ``dict``. orjson's bytes differ from Python's in form only (UTF-8 where
Python escapes, ``1e-07`` written ``1e-7``): both read back as equal values.
"""

from __future__ import annotations

from typing import Any

import orjson
from faust.serializers.codecs import Codec
from faust.utils.json import JSONEncoder

from squall.policy.codec import loads

_ENCODER = JSONEncoder(separators=(",", ":"))  # what faust.utils.json.dumps builds on every call without orjson
# anything orjson would write in its own way (a subclass, a dataclass, a datetime) makes it raise: Python's json decides
_STRICT = orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


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
        data = encode(obj)
        self._last = (obj, data)
        return data

    def _loads(self, s: bytes) -> Any:
        return loads(s)


def encode(obj: Any) -> bytes:
    """``obj`` as JSON bytes: orjson's for a ``dict`` that reads back as itself, Python's ``json``'s otherwise.

    orjson writes a ``NaN`` or an infinity as ``null``; every other ``null`` is
    a ``None``, so bytes with no more ``null`` than the record has ``None``
    values at its top level hold none (a ``"null"`` inside a string, or a
    ``None`` deeper down, only costs the slower way). Raises what Python's
    ``json`` raises (``TypeError`` for a value it cannot write, ``ValueError``
    for a circular one).
    """
    if type(obj) is dict:
        try:
            data = orjson.dumps(obj, option=_STRICT)
        except TypeError:  # orjson.JSONEncodeError: a key or value it will not write as Python's json does
            pass
        else:
            if data.count(b"null") == list(obj.values()).count(None):
                return data
    return _ENCODER.encode(obj).encode("utf-8")
