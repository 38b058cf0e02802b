"""When a blocking SendMessage reads its task again: soon at first, then a tenth of the time waited so far."""

from __future__ import annotations

# A turn that ends between two reads is seen at the next one, so the gap after a read is what a caller may wait
# beyond the turn: at least FIRST_GAP_S (the reads of a fast turn stay a few per 100 ms), then GAP_FRACTION of
# the time waited so far (the added latency stays that share of the turn's own time), at most LONGEST_GAP_S.
# bench/README.md "Blocking SendMessage: how it waits" tabulates what this costs in reads and in latency.
FIRST_GAP_S = 0.02
GAP_FRACTION = 0.1
LONGEST_GAP_S = 1.0


def next_gap(waited_s: float) -> float:
    """Seconds from a read `waited_s` into the wait to the next read."""
    return min(LONGEST_GAP_S, max(FIRST_GAP_S, GAP_FRACTION * waited_s))


def read_times(wait_s: float) -> list[float]:
    """When (seconds into the wait) the task is read while its turn runs on, up to a wait of `wait_s`: the
    first read at once, the last at the end of the wait."""
    times = [0.0]
    while times[-1] < wait_s:
        times.append(min(wait_s, times[-1] + next_gap(times[-1])))
    return times
