"""Per-model prices (USD per million tokens) for the run's cost accounting.

Prompt-cache writes cost 1.25x the input price (5-minute cache) and reads 0.1x. A model not
listed here is still counted in tokens; its cost is reported as unknown rather than guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Usage


@dataclass(frozen=True)
class Price:
    input: float
    output: float

    @property
    def cache_write(self) -> float:
        return self.input * 1.25

    @property
    def cache_read(self) -> float:
        return self.input * 0.1


# Longest prefix wins: "claude-sonnet-4-5-20250929" matches "claude-sonnet-4".
PRICES: dict[str, Price] = {
    "claude-opus-4-5": Price(5.0, 25.0),
    "claude-opus-4-6": Price(5.0, 25.0),
    "claude-opus-4": Price(15.0, 75.0),
    "claude-sonnet-4": Price(3.0, 15.0),
    "claude-3-7-sonnet": Price(3.0, 15.0),
    "claude-3-5-sonnet": Price(3.0, 15.0),
    "claude-haiku-4": Price(1.0, 5.0),
    "claude-3-5-haiku": Price(0.8, 4.0),
}


def price_of(model: str) -> Price | None:
    name = model.split("@", 1)[0]  # Vertex ids look like claude-sonnet-4-5@20250929
    matches = [key for key in PRICES if name.startswith(key)]
    return PRICES[max(matches, key=len)] if matches else None


def cost_usd(model: str, usage: Usage) -> float | None:
    price = price_of(model)
    if price is None:
        return None
    total = (usage.input_tokens * price.input + usage.output_tokens * price.output
             + usage.cache_creation_input_tokens * price.cache_write
             + usage.cache_read_input_tokens * price.cache_read)
    return total / 1_000_000
