"""Typed reads of a worker task's JSON payload: each failure names the key and what it should hold.

A worker task's payload crosses the process boundary as JSON; the dataclasses that carry it
(such as :mod:`.gates.task_payload` and the gates' settings) read it back through :class:`PayloadReader`, so
a payload that lacks a key or holds a value of the wrong type gives a :class:`PayloadError` with a
clear message instead of a ``KeyError`` deep inside a gate. Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping
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

    def text(self, key: str, default: Any = _MISSING) -> Any:
        """A string (``default``, which may be None, when absent)."""
        value = self._get(key, default)
        if value is not default and not isinstance(value, str):
            raise self._wrong(key, value, "a string")
        return value

    def texts(self, key: str, default: Any = _MISSING) -> tuple[str, ...]:
        value = self._get(key, default)
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise self._wrong(key, value, "a list of strings")
        return tuple(value)

    def flag(self, key: str, default: Any = _MISSING) -> Any:
        value = self._get(key, default)
        if value is not default and not isinstance(value, bool):
            raise self._wrong(key, value, "true or false")
        return value

    def number(self, key: str, default: Any = _MISSING) -> Any:
        value = self._get(key, default)
        if value is default:
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._wrong(key, value, "a number")
        return float(value)

    def integer(self, key: str, default: Any = _MISSING) -> Any:
        value = self._get(key, default)
        if value is default:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._wrong(key, value, "an integer")
        return value

    def integers(self, key: str, default: Any = _MISSING) -> tuple[int, ...]:
        value = self._get(key, default)
        if not isinstance(value, (list, tuple)) or \
                not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise self._wrong(key, value, "a list of integers")
        return tuple(value)

    def mapping(self, key: str, default: Any = _MISSING) -> Any:
        value = self._get(key, default)
        if value is not default and not isinstance(value, dict):
            raise self._wrong(key, value, "a JSON object")
        return value

    def records(self, key: str, default: Any = _MISSING) -> Any:
        """A list of JSON objects."""
        value = self._get(key, default)
        if value is not default and (not isinstance(value, (list, tuple)) or
                                     not all(isinstance(v, dict) for v in value)):
            raise self._wrong(key, value, "a list of JSON objects")
        return value

    def numbers(self, key: str, default: Any = _MISSING) -> Any:
        value = self._get(key, default)
        if value is default:
            return value
        if not isinstance(value, (list, tuple)) or \
                not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            raise self._wrong(key, value, "a list of numbers")
        return tuple(float(v) for v in value)


__all__ = ["PayloadError", "PayloadReader"]
