"""`python -m bench` (`make bench`): every figure in one run; prints a table and writes bench/results/latest.json
(one key per figure, plus the two protocol ratios as `get_task_ratio` and `send_message_ratio`)."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import signal
import statistics
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

RESULTS = Path(__file__).resolve().parent / "results" / "latest.json"
FIGURES = ("protocol", "mangum", "cold_start", "push_deliveries", "aws_calls", "queue_handoff", "push_fairness", "push_black_hole")
T = TypeVar("T")


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
    parser.add_argument("--seconds", type=int, default=10, help="measured seconds per load run (default 10)")
    parser.add_argument(
        "--warmup", type=int, default=2, help="warm-up seconds before each load run (default 2)"
    )
    parser.add_argument("--connections", type=int, default=16, help="concurrent connections (default 16)")
    parser.add_argument("--repeats", type=int, default=5, help="cold-start runs per command (default 5)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument(
        "--only", default="", help=f"comma-separated figures to run (default all): {','.join(FIGURES)}"
    )
    args = parser.parse_args(argv)
    only = set(filter(None, args.only.split(","))) or set(FIGURES)
    if only - set(FIGURES):
        parser.error(f"unknown figures: {sorted(only - set(FIGURES))}")
    signal.signal(signal.SIGTERM, _stop_on_sigterm)

    started = time.monotonic()
    load = LoadSettings(choose_generator(), args.seconds, args.warmup, args.connections)
    results: dict[str, Any] = {"meta": _meta(load)}
    if "protocol" in only:
        with tempfile.TemporaryDirectory(prefix="nylorun-bench-") as logs:
            results["protocol"] = _timed(
                f"1. protocol layer ({load.generator}, {2 * len(protocol.SERVERS)} runs of "
                f"{load.warmup}+{load.seconds} s)",
                lambda: protocol.run(load, Path(logs)),
            )
        results["get_task_ratio"] = results["protocol"]["get_task_ratio"]
        results["send_message_ratio"] = results["protocol"]["send_message_ratio"]
    if "mangum" in only:
        results["mangum"] = _timed("2. Mangum path (in-process)", mangum_path.run)
    if "cold_start" in only:
        results["cold_start"] = _timed("3. cold start (fresh processes)", lambda: cold_start.run(args.repeats))
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
                results["queue_handoff"] = _timed("5a. queue handoff (local Runtime)", lambda: queue_handoff(bench))
            if "push_fairness" in only:
                results["push_fairness"] = _timed(
                    "6. fair push: 1,000 configs on one task (local Runtime)", lambda: fairness.push_fairness(bench)
                )
            if "push_black_hole" in only:
                results["push_black_hole"] = _timed(
                    "7. fair delivery workers: 10 tasks × 10 configs at a black hole (local Runtime)",
                    lambda: black_hole.push_black_hole(bench),
                )
    if only != set(FIGURES) and args.output.exists():
        # A partial run (--only) replaces its own figures and keeps the others the file holds, from earlier runs.
        earlier = json.loads(args.output.read_text())
        kept = {k: v for k, v in earlier.items() if k not in ("meta", "targets")}
        # When each figure was measured: this run's now, the kept ones when their run measured them.
        dates = {k: earlier["meta"].get("date") for k in kept} | earlier["meta"].get("figure_dates", {})
        results = {**kept, **results}
        results["meta"]["figure_dates"] = {
            k: dates.get(k) for k in results if k != "meta"
        } | {k: results["meta"]["date"] for k in results if k in only}
    results["targets"] = targets(results)
    results["meta"]["wall_seconds"] = round(time.monotonic() - started, 1)
    results["meta"]["load_average_after"] = [round(x, 2) for x in os.getloadavg()]

    args.output.parent.mkdir(parents=True, exist_ok=True)
    partial = args.output.with_suffix(".json.tmp")
    partial.write_text(json.dumps(results, indent=2) + "\n")
    partial.replace(args.output)
    print(render(results))
    _log(f"wrote {args.output}")
    return 0


def _meta(load: LoadSettings) -> dict[str, Any]:
    return {
        "command": "make bench",
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_generator": load.generator,
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
    }


# ---------------------------------------------------------------- the targets (issue 13, item 8)
def targets(results: dict[str, Any]) -> dict[str, Any]:
    """Each hot-path target this run measured: its figure, the target and whether it is met."""
    found: dict[str, Any] = {}
    if "protocol" in results:
        for op, t in results["protocol"]["targets"].items():
            found[f"{op}_vs_reference"] = t
    api = results.get("cold_start", {}).get("api", {})
    if "baseline" in api:
        found["api_cold_import_vs_baseline"] = api["baseline"]
        found["api_forbidden_packages"] = api["forbidden_packages"]
    if "push_fairness" in results:
        fair = results["push_fairness"]
        found["other_push_latency_vs_baseline"] = {k: fair[k] for k in ("ratio", "target", "met")}
    if "push_black_hole" in results:
        hole = results["push_black_hole"]
        found["other_push_latency_vs_black_hole"] = {k: hole[k] for k in ("ratio", "target", "met")}
    return found


def _verdict(met: bool) -> str:
    return "ok" if met else "FAIL"


# ---------------------------------------------------------------- the table
def render(results: dict[str, Any]) -> str:
    meta = results["meta"]
    lines = [
        (
            f"Nylorun Runtime benchmarks — {meta['date']}, Python {meta['python']}, {meta['cpus']} CPUs, "
            f"load average before {meta['load_average_before']} after {meta['load_average_after']}, "
            f"wall time {meta['wall_seconds']:.0f} s"
        ),
    ]
    sections = (
        ("protocol", _protocol), ("mangum", _mangum), ("cold_start", _cold_start), ("aws_calls", _aws_calls),
        ("queue_handoff", _handoff), ("push_deliveries", _pushed), ("push_fairness", _fairness),
        ("push_black_hole", _black_hole), ("targets", _targets),
    )  # fmt: skip
    for key, section in sections:
        if results.get(key):  # a figure this run did not measure is left out
            lines += section(results)
    return "\n".join(lines)


def _protocol(results: dict[str, Any]) -> list[str]:
    proto = results["protocol"]
    lines = [
        "",
        (
            "1. Protocol layer: uvicorn (1 worker, uvloop, httptools), in-memory stores, "
            f"{proto['load']['generator']} with {proto['load']['connections']} connections, "
            f"{proto['load']['seconds']} s after {proto['load']['warmup_seconds']} s warm-up"
        ),
        f"   {'server':<16} {'operation':<12} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}",
    ]
    for server, ops in proto["servers"].items():
        for op, r in ops.items():
            name = "GetTask" if op == "get_task" else "SendMessage"
            lines.append(
                f"   {server:<16} {name:<12} {r['requests_per_second']:>8.0f} {r['p50_ms']:>8.1f} "
                f"{r['p99_ms']:>8.1f} {r['errors']:>7}"
            )
    lines.append(
        f"   ours / reference: GetTask {results['get_task_ratio']:.2f}, "
        f"SendMessage {results['send_message_ratio']:.2f};   ours / ceiling: "
        f"GetTask {proto['ours_of_ceiling']['get_task']:.2f}, SendMessage {proto['ours_of_ceiling']['send_message']:.2f}"
        f";   ours_threadpool / reference: GetTask {proto['threadpool_of_reference']['get_task']:.2f}, "
        f"SendMessage {proto['threadpool_of_reference']['send_message']:.2f}"
    )
    return lines


def _mangum(results: dict[str, Any]) -> list[str]:
    lines = ["", "2. Mangum path: functions/api handler in-process, API Gateway HTTP API v2 events, in-memory store"]
    for op, r in (("GetTask", results["mangum"]["get_task"]), ("card", results["mangum"]["card"])):
        lines.append(
            f"   {op:<8} {r['invocations_per_second']:>8.0f} invocations/s   p50 {r['p50_ms']:.2f} ms   "
            f"p99 {r['p99_ms']:.2f} ms"
        )
    return lines


def _cold_start(results: dict[str, Any]) -> list[str]:
    cold = results["cold_start"]
    lines = [
        "",
        f"3. Cold start: fresh process, median of {cold['repeats']} (python alone: {cold['python_startup_ms']:.0f} ms)",
        f"   {'function':<10} {'handler ms':>10} {'deps ms':>9} {'ratio':>6}",
    ]
    for function in cold_start.functions():
        c = cold.get(function, {})
        if "error" in c:
            lines.append(f"   {function:<10} failed to import: {' '.join(c['error'])}")
        elif c:
            lines.append(f"   {function:<10} {c['handler_ms']:>10.0f} {c['deps_ms']:>9.0f} {c['ratio']:>6.2f}")
    api = cold.get("api", {})
    if "baseline" in api:
        base, forbidden = api["baseline"], api["forbidden_packages"]
        lines += [
            (
                f"   api handler {api['handler_ms']:.0f} ms against {base['baseline_ms']:.0f} ms for importing "
                f"`{base['imports']}` alone: ratio {base['ratio']:.2f}"
            ),
            f"   api handler loads: {', '.join(api['third_party_packages'])}",
            f"   api handler loads none of {', '.join(forbidden['checked'])}: "
            + ("ok" if forbidden["ok"] else f"FAIL ({', '.join(forbidden['loaded'])} loaded)"),
        ]
    return lines


def _aws_calls(results: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "4. AWS calls per operation (local Runtime on moto; lambda = our functions' invocations)",
        f"   {'operation':<24} "
        + " ".join(f"{s:>13}" for s in ("dynamodb", "stepfunctions", "sqs", "events", "lambda"))
        + f" {'total':>6} {'SFN transitions':>16}",
    ]
    for op, r in results["aws_calls"].items():
        if not isinstance(r, dict):
            continue
        transitions = "" if r["sfn_state_transitions"] is None else str(r["sfn_state_transitions"])
        lines.append(
            f"   {op:<24} "
            + " ".join(f"{n:>13}" for n in r["by_service"].values())
            + f" {r['total']:>6} {transitions:>16}"
        )
    return lines


def _handoff(results: dict[str, Any]) -> list[str]:
    handoff = results["queue_handoff"]
    return [
        "",
        (
            f"5. Queue handoff (turn end → next queued turn start, local Runtime): median "
            f"{handoff['median_ms']:.0f} ms over {len(handoff['gaps_ms'])} gaps {handoff['gaps_ms']}"
        ),
        f"   turn function AWS calls and invocations in each gap: {handoff['turn_function_calls_per_gap']}",
    ]


def _pushed(results: dict[str, Any]) -> list[str]:
    pushed = results["push_deliveries"]
    return [f"   Push deliveries to a local receiver: {pushed['deliveries_per_second']:.0f}/s (one instance, in-process)"]


def _quartiles(values: list[float]) -> list[int]:
    return [round(q) for q in statistics.quantiles(values, n=4)]


def _fairness(results: dict[str, Any]) -> list[str]:
    fair = results["push_fairness"]
    return [
        "",
        (
            f"6. Fair push (local Runtime): another subject's delivery {fair['under_load_median_ms']:.0f} ms while one "
            f"task's {fair['configs']} configs are pushed, against {fair['baseline_median_ms']:.0f} ms alone: "
            f"{fair['ratio']:.2f}x, the slowest run {fair.get('worst_ratio', fair['ratio']):.2f}x"
        ),
        (
            f"   {len(fair['under_load_ms'])} runs under load, quartiles {_quartiles(fair['under_load_ms'])} ms; "
            f"{len(fair['baseline_ms'])} alone, quartiles {_quartiles(fair['baseline_ms'])} ms"
        ),
        f"   the {fair['configs']} deliveries took {fair['fan_out_delivered_seconds']} s",
        *(
            [(f"   of those, arrived while each loaded run was on its way: median "
              f"{statistics.median(fair['delivered_meanwhile']):.0f}, most {max(fair['delivered_meanwhile'])}")]
            if "delivered_meanwhile" in fair else []
        ),
        *(
            [(f"   control, no push: next to one busy Python thread {statistics.median(fair['busy_thread_ms']):.0f} ms, "
              f"{fair['busy_thread_ratio']:.2f}x")]
            if "busy_thread_ms" in fair else []
        ),
        *(
            [(f"   of which its turn (send → COMPLETED written): median {statistics.median(fair['under_load_turn_ms']):.0f} "
              f"ms loaded, {statistics.median(fair['baseline_turn_ms']):.0f} ms alone; the rest is its push path")]
            if "baseline_turn_ms" in fair else []
        ),
    ]


def _black_hole(results: dict[str, Any]) -> list[str]:
    hole = results["push_black_hole"]
    return [
        "",
        (
            f"7. Fair delivery workers (local Runtime): another subject's delivery while one subject's "
            f"{hole['tasks']} tasks × {hole['configs_per_task']} configs aim at a receiver that never answers: "
            f"{hole['ratio']:.2f}x its baseline (median of {hole['pairs']} pairs A B), min {hole['min_ratio']:.2f}x, "
            f"max {hole['max_ratio']:.2f}x"
        ),
        (
            f"   {hole['under_load_median_ms']:.0f} ms under load against {hole['baseline_median_ms']:.0f} ms alone; "
            f"each pair: {hole['ratios']}"
        ),
        (
            f"   control, the same 100 deliveries answered at once: {hole['control_ratio']:.2f}x "
            f"(each pair: {hole['control_ratios']})"
        ),
    ]


def _targets(results: dict[str, Any]) -> list[str]:
    found = results["targets"]
    lines = ["", "Targets (issue 13, item 8)"]
    for name in ("get_task_vs_reference", "send_message_vs_reference"):
        if name in found:
            t = found[name]
            lines.append(f"   {name:<30} {t['ratio']:>6.2f}  (at least {t['target']}): {_verdict(t['met'])}")
    if "api_cold_import_vs_baseline" in found:
        t = found["api_cold_import_vs_baseline"]
        lines.append(
            f"   {'api_cold_import_vs_baseline':<30} {t['ratio']:>6.2f}  (at most {t['target']}): {_verdict(t['met'])}"
        )
        f = found["api_forbidden_packages"]
        lines.append(f"   {'api_forbidden_packages':<30} {f['loaded'] or 'none'}: {_verdict(f['ok'])}")
    if "other_push_latency_vs_baseline" in found:
        t = found["other_push_latency_vs_baseline"]
        lines.append(
            f"   {'other_push_latency_vs_baseline':<30} {t['ratio']:>6.2f}  (at most {t['target']}, issue 15): "
            f"{_verdict(t['met'])}"
        )
    if "other_push_latency_vs_black_hole" in found:
        t = found["other_push_latency_vs_black_hole"]
        lines.append(
            f"   {'other_push_latency_vs_black_hole':<30} {t['ratio']:>6.2f}  (at most {t['target']}): "
            f"{_verdict(t['met'])}"
        )
    return lines


if __name__ == "__main__":
    sys.exit(main())
