"""`python -m bench` (`make bench`): every figure in one run, each a median of interleaved pairs with its spread;
prints a table and writes bench/results/latest.json (every sample, one key per figure, plus the two protocol ratios'
medians as `get_task_ratio` and `send_message_ratio`)."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from bench import black_hole, cold_start, fairness, mangum_path, protocol, push
from bench.load import LoadSettings, choose_generator
from bench.local_stack import Bench, aws_calls, queue_handoff
from bench.render import render

RESULTS = Path(__file__).resolve().parent / "results" / "latest.json"
FIGURES = (
    "protocol",
    "mangum",
    "cold_start",
    "push_deliveries",
    "aws_calls",
    "queue_handoff",
    "push_fairness",
    "push_black_hole",
)
T = TypeVar("T")
# Interleaved pairs per figure: five pairs' median holds where one sample moved 1.14x-1.78x between runs.
PAIRS = 5
FORMAT = 2  # every figure a median of pairs, with its spread and every sample


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@contextlib.contextmanager
def _quiet_stdout() -> Iterator[None]:
    """Powertools prints metric batches (EMF) to stdout; in-process figures keep them out of the table."""
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        yield


def _timed(title: str, figure: Callable[[], T]) -> T:
    _log(f"… {title}")
    started = time.monotonic()
    with _quiet_stdout():
        result = figure()
    _log(f"  done in {time.monotonic() - started:.0f} s")
    return result


def _stop_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # so every `with` block stops what it started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--seconds", type=int, default=4, help="measured seconds per load run (default 4)")
    parser.add_argument(
        "--warmup", type=int, default=1, help="warm-up seconds before each load run (default 1)"
    )
    parser.add_argument("--connections", type=int, default=16, help="concurrent connections (default 16)")
    parser.add_argument(
        "--pairs",
        type=int,
        default=PAIRS,
        help=f"interleaved pairs (ours, baseline) per figure (default {PAIRS})",
    )
    parser.add_argument(
        "--quick", action="store_true", help="one pair of each figure: a smoke run, not a figure"
    )
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument(
        "--only", default="", help=f"comma-separated figures to run (default all): {','.join(FIGURES)}"
    )
    args = parser.parse_args(argv)
    only = set(filter(None, args.only.split(","))) or set(FIGURES)
    if only - set(FIGURES):
        parser.error(f"unknown figures: {sorted(only - set(FIGURES))}")
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    pairs = 1 if args.quick else args.pairs
    if pairs < 1:
        parser.error("--pairs must be at least 1")

    started = time.monotonic()
    load = LoadSettings(choose_generator(), args.seconds, args.warmup, args.connections)
    results: dict[str, Any] = {"meta": {**_meta(load), "pairs": pairs, "quick": args.quick}}
    if "protocol" in only:
        with tempfile.TemporaryDirectory(prefix="nylorun-bench-") as logs:
            results["protocol"] = _timed(
                f"1. protocol layer ({load.generator}, {pairs} pairs ours/reference and the others once, "
                f"each {load.warmup}+{load.seconds} s)",
                lambda: protocol.run(load, Path(logs), pairs),
            )
        results["get_task_ratio"] = results["protocol"]["get_task_ratio"]
        results["send_message_ratio"] = results["protocol"]["send_message_ratio"]
    if "mangum" in only:
        results["mangum"] = _timed("2. Mangum path (in-process)", mangum_path.run)
    if "cold_start" in only:
        results["cold_start"] = _timed("3. cold start (fresh processes)", lambda: cold_start.run(pairs))
    if "push_deliveries" in only:
        results["push_deliveries"] = _timed("5b. push deliveries (in-process)", push.run)
    if only & {"aws_calls", "queue_handoff", "push_fairness", "push_black_hole"}:
        bench = Bench()
        with _quiet_stdout(), bench.running():
            if "aws_calls" in only:
                results["aws_calls"] = _timed(
                    "4. AWS calls per operation (local Runtime)", lambda: aws_calls(bench)
                )
            if "queue_handoff" in only:
                results["queue_handoff"] = _timed(
                    "5a. queue handoff (local Runtime)", lambda: queue_handoff(bench)
                )
            if "push_fairness" in only:
                results["push_fairness"] = _timed(
                    "6. fair push: 1,000 configs on one task (local Runtime)",
                    lambda: fairness.push_fairness(bench, pairs=pairs),
                )
            if "push_black_hole" in only:
                results["push_black_hole"] = _timed(
                    "7. fair delivery workers: 10 tasks × 10 configs at a black hole (local Runtime)",
                    lambda: black_hole.push_black_hole(bench, pairs=pairs),
                )
    if only != set(FIGURES) and args.output.exists():
        # A partial run (--only) replaces its own figures and keeps the others the file holds, from earlier runs.
        earlier = json.loads(args.output.read_text())
        # Figures of a file written before they were pairs (no `format`) are not kept: the table reads spreads.
        same_format = earlier.get("meta", {}).get("format") == FORMAT
        kept = {k: v for k, v in earlier.items() if k not in ("meta", "targets") and same_format}
        # When each figure was measured: this run's now, the kept ones when their run measured them.
        dates = {k: earlier["meta"].get("date") for k in kept} | earlier["meta"].get("figure_dates", {})
        results = {**kept, **results}
        results["meta"]["figure_dates"] = {k: dates.get(k) for k in results if k != "meta"} | {
            k: results["meta"]["date"] for k in results if k in only
        }
    results["targets"] = targets(results)
    results["meta"]["wall_seconds"] = round(time.monotonic() - started, 1)
    results["meta"]["load_average_after"] = [round(x, 2) for x in os.getloadavg()]

    args.output.parent.mkdir(parents=True, exist_ok=True)
    partial = args.output.with_suffix(".json.tmp")
    partial.write_text(json.dumps(results, indent=2) + "\n")
    partial.replace(args.output)
    print(render(results))
    _log(f"wrote {args.output}; elapsed {results['meta']['wall_seconds']:.0f} s")
    return 0


def _meta(load: LoadSettings) -> dict[str, Any]:
    return {
        "command": "make bench",
        "format": FORMAT,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_generator": load.generator,
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
    }


# ---------------------------------------------------------------- the targets (bench/README.md), on medians
def targets(results: dict[str, Any]) -> dict[str, Any]:
    """Each hot-path target this run measured: its median figure, spread, target and whether the median meets it."""
    found: dict[str, Any] = {}

    def judged(name: str, figure: dict[str, Any], at: str) -> None:
        spread_ = figure.get("spread") or {"median": figure["ratio"]}
        found[name] = {"ratio": figure["ratio"], "spread": spread_, "target": figure["target"], "at": at,
                       "met": figure["met"]}  # fmt: skip

    if "protocol" in results:
        for op, t in results["protocol"]["targets"].items():
            judged(f"{op}_vs_reference", t, "most" if op.endswith("p99") else "least")
    api = results.get("cold_start", {}).get("api", {})
    if "baseline" in api:
        judged("api_cold_start_vs_baseline", api["baseline"], "most")
        found["api_forbidden_packages"] = api["forbidden_packages"]
    if "push_fairness" in results:
        judged("other_push_latency_vs_baseline", results["push_fairness"], "most")
    if "push_black_hole" in results:
        judged("other_push_latency_vs_black_hole", results["push_black_hole"], "most")
    return found


if __name__ == "__main__":
    sys.exit(main())
