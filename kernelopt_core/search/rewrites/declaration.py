"""What a rewrite family declares about itself when it is registered in FAMILIES: when the offline
planner tries it (the analyst's directions and causes that call for it, its place in each device's
default order) and what the cost model expects of it (the share of its traffic bound it reaches).

The planner's tables and the cost model's figures are derived from these declarations, so a new
family is placed by its registration alone; :func:`register_families` refuses a family without
a complete declaration.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

from ...analyst import CAUSES

Stage = Literal["launcher", "algorithm", "later"]
STAGES: tuple[Stage, ...] = ("launcher", "algorithm", "later")
DEVICES = ("cpu", "cuda")


class FamilyDeclarationError(ValueError):
    """A family registered without a complete, valid declaration."""


@dataclass(frozen=True)
class CauseCall:
    """An analyst cause that calls for the family, and where the planner then puts it.

    ``stage``: ``launcher`` before the algorithmic families, ``algorithm`` with them, ``later``
    after them. ``rank``: the family's place among those the cause calls for at that stage (1 first).
    ``pointwise_only``: the cause calls for it only on a pointwise kernel.
    """

    cause: str
    stage: Stage
    rank: int
    pointwise_only: bool = False


@dataclass(frozen=True)
class FamilyDeclaration:
    """Everything the planner and the cost model know of a family; every field must be given.

    ``directions``: analyst direction -> the family's rank among the families it calls for (1 first).
    ``causes``: the analyst causes that call for it.
    ``device_order``: ``cpu`` / ``cuda`` -> its place in the order families are tried in when no
    evidence says otherwise (1 first); a device left out never tries it by default.
    ``traffic_efficiency``: the share of its traffic bound the family reaches (the cost model's
    expected speed of light); None for a family without a traffic model.
    """

    directions: Mapping[str, int]
    causes: tuple[CauseCall, ...]
    device_order: Mapping[str, int]
    traffic_efficiency: float | None


class DeclaredFamily(Protocol):
    """What registration reads of a family (:class:`~.base.RewriteFamily` is one)."""

    name: str
    declaration: FamilyDeclaration


F = TypeVar("F", bound=DeclaredFamily)


def check_declaration(name: str, declaration: object) -> FamilyDeclaration:
    """The declaration, or :class:`FamilyDeclarationError` saying what is missing or wrong."""
    if not isinstance(declaration, FamilyDeclaration):
        raise FamilyDeclarationError(f"rewrite family {name!r} is registered without a FamilyDeclaration "
                                     f"(directions, causes, device order, traffic efficiency)")
    problems = [f"rank {rank} of direction {direction!r} is not a positive integer"
                for direction, rank in declaration.directions.items() if not _is_rank(rank)]
    for call in declaration.causes:
        if call.cause not in CAUSES:
            problems.append(f"cause {call.cause!r} is none of the analyst's ({', '.join(CAUSES)})")
        if call.stage not in STAGES:
            problems.append(f"stage {call.stage!r} of cause {call.cause!r} is none of {', '.join(STAGES)}")
        if not _is_rank(call.rank):
            problems.append(f"rank {call.rank} of cause {call.cause!r} is not a positive integer")
    for device, place in declaration.device_order.items():
        if device not in DEVICES:
            problems.append(f"device {device!r} is none of {', '.join(DEVICES)}")
        if not _is_rank(place):
            problems.append(f"place {place} in the {device} order is not a positive integer")
    efficiency = declaration.traffic_efficiency
    if efficiency is not None and not (isinstance(efficiency, (int, float)) and 0 < efficiency <= 1):
        problems.append(f"traffic efficiency {efficiency!r} is not a share in (0, 1]")
    if problems:
        raise FamilyDeclarationError(f"rewrite family {name!r}: " + "; ".join(problems))
    return declaration


def _is_rank(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def register_families(*declared: tuple[F, FamilyDeclaration]) -> dict[str, F]:
    """FAMILIES: each family by name, its declaration checked and attached (``family.declaration``)."""
    families: dict[str, F] = {}
    for family, declaration in declared:
        if family.name in families:
            raise FamilyDeclarationError(f"rewrite family {family.name!r} is registered twice")
        family.declaration = check_declaration(family.name, declaration)
        families[family.name] = family
    return families


# --- the tables derived from the declarations (ties keep the registration order) -------------------


def _ranked(entries: Iterable[tuple[str, int, str]]) -> dict[str, tuple[str, ...]]:
    by_key: dict[str, list[tuple[int, int, str]]] = {}
    for position, (key, rank, family) in enumerate(entries):
        by_key.setdefault(key, []).append((rank, position, family))
    return {key: tuple(family for _, _, family in sorted(found)) for key, found in by_key.items()}


def direction_families(families: Mapping[str, DeclaredFamily]) -> dict[str, tuple[str, ...]]:
    """Analyst direction -> the families it calls for, in the order they are tried."""
    return _ranked((direction, rank, name) for name, family in families.items()
                   for direction, rank in family.declaration.directions.items())


def cause_families(families: Mapping[str, DeclaredFamily], stage: Stage, *,
                   pointwise: bool = True) -> dict[str, tuple[str, ...]]:
    """Analyst cause -> the families it calls for at ``stage``, in the order they are tried
    (``pointwise=False``: without those it calls for on pointwise kernels only)."""
    return _ranked((call.cause, call.rank, name) for name, family in families.items()
                   for call in family.declaration.causes
                   if call.stage == stage and (pointwise or not call.pointwise_only))


def default_order(families: Mapping[str, DeclaredFamily]) -> dict[str, tuple[str, ...]]:
    """Device -> the order families are tried in when no evidence says otherwise."""
    return _ranked((device, place, name) for name, family in families.items()
                   for device, place in family.declaration.device_order.items())


def traffic_efficiencies(families: Mapping[str, DeclaredFamily]) -> dict[str, float]:
    """Family -> the share of its traffic bound it reaches, for the families with a traffic model."""
    return {name: family.declaration.traffic_efficiency for name, family in families.items()
            if family.declaration.traffic_efficiency is not None}
