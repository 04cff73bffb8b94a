"""Typed reads of a worker task's JSON payload: each failure names the key and what it should hold.

A worker task's payload crosses the process boundary as JSON; the dataclasses that carry it
(such as :mod:`.gates.task_payload` and the gates' settings) read it back through :class:`PayloadReader`, so
a payload that lacks a key or holds a value of the wrong type gives a :class:`PayloadError` with a
clear message instead of a ``KeyError`` deep inside a gate. Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


class PayloadError(ValueError):
    """A worker task's payload lacks a key it needs or holds a value of the wrong type."""


_MISSING = object()


class PayloadReader:
    """Typed reads of one JSON payload; every failure is a :class:`PayloadError` that names the key."""

    def __init__(self, data: Mapping[str, Any], what: str = "the payload"):
        if not isinstance(data, Mapping):
            raise PayloadError(f"{what} is a {type(data).__name__}, not a JSON object")
        self.data = data
        self.what = what

    def _get(self, key: str, default: Any) -> Any:
        value = self.data.get(key, _MISSING)
        if value is _MISSING or value is None:
            if default is _MISSING:
                raise PayloadError(f"{self.what} has no {key!r}")
            return default
        return value

    def _wrong(self, key: str, value: Any, wanted: str) -> PayloadError:
        return PayloadError(f"{self.what}'s {key!r} is {type(value).__name__} {str(value)[:80]!r}, not {wanted}")

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def _read(self, key: str, default: Any, accepts: Callable[[Any], bool], wanted: str) -> Any:
        """The value at ``key``, or ``default`` when it is absent; a value ``accepts`` refuses is an error."""
        value = self._get(key, default)
        if value is not default and not accepts(value):
            raise self._wrong(key, value, wanted)
        return value

    def text(self, key: str, default: Any = _MISSING) -> Any:
        """A string (``default``, which may be None, when absent)."""
        return self._read(key, default, lambda v: isinstance(v, str), "a string")

    def texts(self, key: str, default: Any = _MISSING) -> tuple[str, ...]:
        return tuple(self._read(key, default, lambda v: _is_list_of(v, str), "a list of strings"))

    def flag(self, key: str, default: Any = _MISSING) -> Any:
        return self._read(key, default, lambda v: isinstance(v, bool), "true or false")

    def number(self, key: str, default: Any = _MISSING) -> Any:
        value = self._read(key, default, _is_number, "a number")
        return value if value is default else float(value)

    def integer(self, key: str, default: Any = _MISSING) -> Any:
        return self._read(key, default, _is_integer, "an integer")

    def integers(self, key: str, default: Any = _MISSING) -> tuple[int, ...]:
        return tuple(self._read(key, default, lambda v: _is_list_of(v, int, _is_integer), "a list of integers"))

    def mapping(self, key: str, default: Any = _MISSING) -> Any:
        return self._read(key, default, lambda v: isinstance(v, dict), "a JSON object")

    def records(self, key: str, default: Any = _MISSING) -> Any:
        """A list of JSON objects."""
        return self._read(key, default, lambda v: _is_list_of(v, dict), "a list of JSON objects")

    def numbers(self, key: str, default: Any = _MISSING) -> Any:
        value = self._read(key, default, lambda v: _is_list_of(v, float, _is_number), "a list of numbers")
        return value if value is default else tuple(float(v) for v in value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_list_of(value: Any, kind: type, accepts: Callable[[Any], bool] | None = None) -> bool:
    check = accepts or (lambda v: isinstance(v, kind))
    return isinstance(value, (list, tuple)) and all(check(v) for v in value)


__all__ = ["PayloadError", "PayloadReader"]
