"""The bench's table: each figure's median with its min and max (its samples are in bench/results/latest.json)."""

from __future__ import annotations

import statistics
from typing import Any

from bench import cold_start


def _s(found: dict[str, Any], digits: int = 2) -> str:
    """A spread as `median [min–max]`."""
    return f"{found['median']:.{digits}f} [{found['min']:.{digits}f}–{found['max']:.{digits}f}]"


def _verdict(met: bool) -> str:
    return "ok" if met else "FAIL"


def render(results: dict[str, Any]) -> str:
    meta = results["meta"]
    lines = [
        (
            f"Nylorun Runtime benchmarks — {meta['date']}, Python {meta['python']}, {meta['cpus']} CPUs, "
            f"load average before {meta['load_average_before']} after {meta['load_average_after']}, "
            f"elapsed {meta['wall_seconds']:.0f} s{' (--quick: one pass each)' if meta.get('quick') else ''}"
        ),
        "Each figure: median [min–max] over interleaved pairs; targets are judged on the median.",
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
    load = proto["load"]
    lines = [
        "",
        (
            "1. Protocol layer: uvicorn (1 worker, uvloop, httptools), in-memory stores, "
            f"{load['generator']} with {load['connections']} connections, {load['pairs']} pairs ours/reference "
            f"in turns, each run {load['seconds']} s after {load['warmup_seconds']} s warm-up"
        ),
        f"   {'server':<16} {'operation':<12} {'req/s':>20} {'p50 ms':>20} {'p99 ms':>20} {'errors':>7}",
    ]
    for server, ops in proto["servers"].items():
        for op, r in ops.items():
            name = "GetTask" if op == "get_task" else "SendMessage"
            lines.append(
                f"   {server:<16} {name:<12} {_s(r['requests_per_second'], 0):>20} {_s(r['p50_ms'], 1):>20} "
                f"{_s(r['p99_ms'], 1):>20} {r['errors']:>7}"
            )
    t = proto["targets"]
    lines += [
        (
            f"   ours / reference req/s: GetTask {_s(t['get_task']['spread'])}, SendMessage "
            f"{_s(t['send_message']['spread'])}; SendMessage p99 ours / reference {_s(t['send_message_p99']['spread'])}"
        ),
        (
            f"   (medians) ours / ceiling: GetTask {proto['ours_of_ceiling']['get_task']:.2f}, SendMessage "
            f"{proto['ours_of_ceiling']['send_message']:.2f}; ours_threadpool / reference: GetTask "
            f"{proto['threadpool_of_reference']['get_task']:.2f}, "
            f"SendMessage {proto['threadpool_of_reference']['send_message']:.2f}"
        ),
    ]
    return lines


def _mangum(results: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "2. Mangum path: functions/api handler in-process, API Gateway HTTP API v2 events, in-memory store",
    ]
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
        (
            f"3. Cold start: fresh processes, {cold['pairs']} pairs in turns (python alone: "
            f"{cold['python_startup_ms']['median']:.0f} ms)"
        ),
        f"   {'function':<10} {'import handler ms':>22} {'import deps ms':>22} {'ratio':>20}",
    ]
    for function in cold_start.functions():
        c = cold.get(function, {})
        if "error" in c:
            lines.append(f"   {function:<10} failed to import: {' '.join(c['error'])}")
        elif c:
            lines.append(
                f"   {function:<10} {_s(c['handler_ms'], 0):>22} {_s(c['deps_ms'], 0):>22} {_s(c['ratio']):>20}"
            )
    api = cold.get("api", {})
    if "baseline" in api:
        base, forbidden = api["baseline"], api["forbidden_packages"]
        ours, bare = base["ours_ms"], base["baseline_ms"]
        lines += [
            (
                f"   api cold start (import + first GetTask): {_s(ours['wall_ms'], 0)} ms (import "
                f"{ours['import_ms']['median']:.0f}, first call {ours['first_call_ms']['median']:.0f}) against "
                f"{_s(bare['wall_ms'], 0)} ms (import {bare['import_ms']['median']:.0f}, first call "
                f"{bare['first_call_ms']['median']:.0f}) for the bare stack: ratio {_s(base['spread'])}"
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
    return [
        f"   Push deliveries to a local receiver: {pushed['deliveries_per_second']:.0f}/s (one instance, in-process)"
    ]


def _pairs_figure(title: str, figure: dict[str, Any]) -> list[str]:
    """Figures 6 and 7: another subject's delivery alone (A) and loaded (B), in pairs; the median of the ratios."""
    return [
        "",
        f"{title}: {_s(figure['spread'])}x its baseline (median of {figure['pairs']} pairs A B [min–max])",
        (
            f"   {figure['under_load_median_ms']:.0f} ms under load against {figure['baseline_median_ms']:.0f} ms "
            f"alone (all runs); each pair: {figure['ratios']}"
        ),
    ]


def _fairness(results: dict[str, Any]) -> list[str]:
    fair = results["push_fairness"]
    lines = _pairs_figure(
        f"6. Fair push (local Runtime): another subject's delivery while one task's {fair['configs']} configs are "
        "pushed",
        fair,
    )
    return lines + [
        (
            f"   the slowest loaded run {fair['worst_ratio']:.2f}x; the {fair['configs']} deliveries took "
            f"{fair['fan_out_delivered_seconds']} s"
        ),
        (
            f"   of those, arrived while each loaded run was on its way: median "
            f"{statistics.median(fair['delivered_meanwhile']):.0f}, most {max(fair['delivered_meanwhile'])}"
        ),
        (
            f"   control, no push: next to one busy Python thread {statistics.median(fair['busy_thread_ms']):.0f} ms, "
            f"{fair['busy_thread_ratio']:.2f}x"
        ),
    ]


def _black_hole(results: dict[str, Any]) -> list[str]:
    hole = results["push_black_hole"]
    lines = _pairs_figure(
        f"7. Fair delivery workers (local Runtime): another subject's delivery while one subject's {hole['tasks']} "
        f"tasks × {hole['configs_per_task']} configs aim at a receiver that never answers",
        hole,
    )
    return lines + [
        (
            f"   control, the same 100 deliveries answered at once: {hole['control_ratio']:.2f}x "
            f"(each pair: {hole['control_ratios']})"
        )
    ]


def _targets(results: dict[str, Any]) -> list[str]:
    found = results["targets"]
    lines = ["", "Targets (bench/README.md), judged on the median [min–max]"]
    for name, t in found.items():
        if name == "api_forbidden_packages":
            lines.append(f"   {name:<34} {t['loaded'] or 'none'}: {_verdict(t['ok'])}")
        else:
            shown = _s(t["spread"]) if "min" in t["spread"] else f"{t['ratio']:.2f}"
            lines.append(f"   {name:<34} {shown:>20}  (at {t['at']} {t['target']}): {_verdict(t['met'])}")
    return lines
