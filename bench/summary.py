"""The bench's one statistic: a figure is the median of its samples (interleaved pairs), printed with its spread."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def spread(samples: Sequence[float], digits: int = 2) -> dict[str, float | int]:
    """Median, min, max and count of a figure's samples. Targets are judged on the median: three runs of one
    tree gave GetTask 1.14x, 1.42x and 1.78x the reference, so one sample cannot say PASS or FAIL."""
    if not samples:
        raise ValueError("no sample to summarize")
    return {
        "median": round(statistics.median(samples), digits),
        "min": round(min(samples), digits),
        "max": round(max(samples), digits),
        "n": len(samples),
    }


def pair_ratios(ours: Sequence[float], theirs: Sequence[float], digits: int = 3) -> list[float]:
    """Each pair's ratio, ours over its partner measured in the same minute: a machine that slows between pairs
    slows both sides of a pair alike, so the ratio of a pair moves less than either side does."""
    return [round(a / b, digits) for a, b in zip(ours, theirs, strict=True)]


def in_turns(pair: int, sides: Sequence[T]) -> list[T]:
    """The order the sides of pair number `pair` (0, 1, ...) run in: as given, then reversed, and so on (A B, B A,
    A B ...). A machine that speeds up or slows down through a run then favors neither side: with A always first,
    every pair's ratio leaned the same way."""
    return list(sides) if pair % 2 == 0 else list(reversed(sides))
