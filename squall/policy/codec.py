"""The one way squall reads a message: a JSON object whose fields a table of :class:`Field` reads.

Each topic's message (:mod:`squall.policy.records`) lists its fields once,
each with the function that turns its JSON value into the field's value;
:func:`decode_fields` applies such a table and turns every refusal into
:class:`squall.errors.MessageError` (bad input: the dead-letter topic, never a
stopped agent). JSON is RFC 8259; Python's reader also takes ``NaN`` and
``Infinity``, so numbers that must be finite say so (:func:`finite_float`).
Messages and table values are read by :func:`loads`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

import orjson

from squall.errors import MessageError

T = TypeVar("T")


def field_values(obj: Any) -> dict[str, Any]:
    """A dataclass instance's fields as a new dict, the values as they are (no copy).

    What a record's JSON is made of: ``dataclasses.asdict`` would deep-copy
    every list and dict, and nested dataclasses are turned into dicts by the
    callers that have them. The dict is new; its values are the record's own,
    so a caller that mutates a nested list or dict must copy it first.
    """
    names = _FIELD_NAMES.get(type(obj))
    if names is None:
        names = _FIELD_NAMES[type(obj)] = tuple(f.name for f in dataclasses.fields(obj))
    return {name: getattr(obj, name) for name in names}


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}  # dataclass → its field names, in order


def evolve(obj: T, **changes: Any) -> T:
    """``dataclasses.replace(obj, **changes)``, without running ``__init__`` when nothing in it can object.

    A record is rebuilt several times a page (a host after each hand-out and
    signal, an audit after each request); ``replace`` gathers every field
    and calls ``__init__`` each time. For a dataclass with no
    ``__post_init__``, no ``init=False`` field and no cached property,
    ``__init__`` only assigns, so a copy of the instance's attributes with
    ``changes`` written over them is the same object, several times cheaper.
    Any other dataclass goes through ``replace``.

    Raises:
        TypeError: a name in ``changes`` is not a field of ``obj`` (as ``replace`` does).
    """
    cls = type(obj)
    names = _PLAIN_FIELDS.get(cls)
    if names is None:
        fields = dataclasses.fields(obj)  # type: ignore[arg-type]
        plain = (
            not hasattr(cls, "__post_init__")
            and all(f.init for f in fields)
            and hasattr(obj, "__dict__")
            and not any(isinstance(v, functools.cached_property) for v in vars(cls).values())
        )
        names = _PLAIN_FIELDS[cls] = frozenset(f.name for f in fields) if plain else frozenset()
    if not names:
        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    for name in changes:
        if name not in names:
            raise TypeError(f"{cls.__name__} has no field {name!r}")
    new = object.__new__(cls)
    attrs = new.__dict__
    attrs.update(obj.__dict__)
    attrs.update(changes)
    return new


_PLAIN_FIELDS: dict[type, frozenset[str]] = {}  # dataclass → its field names, or empty: evolve() uses replace()


def clean(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` without its None values, enums as their values (the JSON object of a message)."""
    return {k: (v.value if isinstance(v, Enum) else v) for k, v in d.items() if v is not None}


def str_list(value: Any, name: str) -> list[str]:
    """A JSON list of strings, else ValueError (a bare string is not a list of URLs)."""
    if not isinstance(value, list) or not all(isinstance(u, str) for u in value):
        raise ValueError(f"{name} must be a list of strings")
    return list(value)


def finite(value: float | None, name: str) -> None:
    """Raise ValueError for a NaN or infinite number (JSON allows them through NaN/Infinity/1e999)."""
    if value is not None and not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")


def loads(raw: bytes | str) -> Any:
    """``json.loads(raw)``'s value, read by orjson where it can (about twice as fast on a URL record).

    orjson reads strict RFC 8259 JSON in UTF-8 into the same values, except
    integers beyond 64 bits, which it reads as floats: bytes with a run of
    19 digits or more are read by ``json.loads``, and so is a ``str`` and what
    orjson refuses and Python's reader takes (``NaN``, ``Infinity``, lone
    surrogates, UTF-16 or -32 bytes); ``json.loads`` also raises what it
    raises for text that is not JSON at all.

    Raises:
        ValueError: not JSON (``json.JSONDecodeError``, ``UnicodeDecodeError``).
        RecursionError: nested too deeply for ``json.loads``.
    """
    if isinstance(raw, bytes) and _LONG_RUN not in raw.translate(_DIGITS_AS_ZERO):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw)


_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_RUN = b"0" * 19  # 19 digits in a row: maybe an integer beyond orjson's 64 bits (2**63 has 19)


def decode_object(raw: bytes) -> dict[str, Any]:
    """The JSON object of a message's bytes (UTF-8).

    Raises:
        MessageError: not JSON, nested too deeply, or not an object.
    """
    try:
        obj = loads(raw)
    except (ValueError, TypeError) as exc:
        raise MessageError(f"not JSON: {exc}") from None
    except RecursionError:
        raise MessageError("not JSON: nested too deeply") from None
    if not isinstance(obj, dict):
        raise MessageError("expected a JSON object")
    return obj


def metadata(value: Any) -> dict[str, list[str]]:
    """Normalize metadata to key → list of strings (a single string becomes a one-item list)."""
    if not isinstance(value, dict):
        raise MessageError("'metadata' must be an object")
    out: dict[str, list[str]] = {}
    for k, v in value.items():
        if isinstance(v, str):
            out[str(k)] = [v]
        elif isinstance(v, list) and all(isinstance(x, str) for x in v):
            out[str(k)] = list(v)
        else:
            raise MessageError(f"metadata {k!r} must be a string or a list of strings")
    return out


@dataclass(frozen=True)
class Field:
    """How one field of a message is read.

    ``read`` turns the JSON value into the field's value (raising
    :class:`MessageError`, ``TypeError`` or ``ValueError`` for bad input); a
    field absent from the object keeps the dataclass default, or is an error
    when ``required``; with ``null_is_absent`` a JSON null counts as absent
    (else it is handed to ``read``).
    """

    name: str
    read: Callable[[Any], Any]
    required: bool = False
    null_is_absent: bool = False


def decode_fields(obj: dict[str, Any], fields: tuple[Field, ...], what: str) -> dict[str, Any]:
    """The fields of ``obj`` read by ``fields``: name → value (absent ones left out).

    Raises:
        MessageError: a required field missing, or a value ``read`` refuses
            (its own message, or ``bad <what> message: ...``).
    """
    out: dict[str, Any] = {}
    try:
        for f in fields:
            value = obj.get(f.name, ABSENT)
            if value is ABSENT or (value is None and f.null_is_absent):
                if f.required:
                    raise KeyError(f.name)
                continue
            out[f.name] = f.read(value)
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise MessageError(f"bad {what} message: {exc}") from None
    return out


ABSENT = object()  # the marker of a field not in the object


def same(value: Any) -> Any:
    """A field taken as it is in the JSON object."""
    return value


def finite_float(name: str) -> Callable[[Any], float]:
    """The reader of a number field ``name`` that must be finite (ValueError otherwise)."""

    def read(value: Any) -> float:
        number = float(value)
        finite(number, name)  # a non-finite time (NaN, inf) would poison the due index and the pace model
        return number

    return read


def boolean(name: str) -> Callable[[Any], bool]:
    """The reader of a JSON boolean field ``name`` (TypeError for anything else)."""

    def read(value: Any) -> bool:
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be a boolean, got {value!r}")
        return value

    return read
