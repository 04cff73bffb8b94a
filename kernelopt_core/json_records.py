"""Dataclasses written to JSON as their fields, and read back from records that may carry other keys.

A record written by an older or newer version of KernelOPT (a run being resumed, a cache, a
worker's reply) can lack fields, which then take their defaults, or carry fields this version
does not know, which are left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any, TypeVar, cast

R = TypeVar("R", bound="JsonRecord")


def known_fields(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of ``data`` that name fields of the dataclass ``cls``."""
    fields = cls.__dataclass_fields__  # type: ignore[attr-defined]  # a dataclass, by contract
    return {name: data[name] for name in fields if name in data}


class JsonRecord:
    """A base for dataclasses: ``to_json`` gives their fields, ``from_json`` reads them back."""

    def to_json(self) -> dict[str, Any]:
        return asdict(cast(Any, self))

    @classmethod
    def from_json(cls: type[R], data: Mapping[str, Any]) -> R:
        return cls(**known_fields(cls, data))
