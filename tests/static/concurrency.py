"""The Lambda concurrency template.yaml may take: its reservations, and the api function's peak under the stage's
throttling, against an account's concurrency quota (docs/deploy.md#sizing-concurrency)."""

from __future__ import annotations

from typing import Any

from nylorun.profile.card import A2A_PATH

# A new account's quota may be far under the default 1,000 concurrent executions (10 is seen), and a reservation must
# leave 100 unreserved ("You can reserve up to the Unreserved account concurrency value ... minus 100"): so a
# default that reserves anything fails creating the function in such an account, and the stack rolls back.
LAMBDA_QUOTAS = "https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html"
LAMBDA_RESERVED = "https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html"
DEFAULT_ACCOUNT_CONCURRENCY, UNRESERVED_MINIMUM = 1000, 100
# The api function has no reservation, so the stage's throttling and A2aWaitMs bound it. Its share of a default
# account at the defaults; the rest is the turn function's (its turns start at most as fast as this route accepts)
# and the queue and stream functions' (PushMaxConcurrency, DispatchMaxConcurrency, one per stream shard).
API_SHARE = 600
# A request holds an api function instance while it runs: a blocking SendMessage for A2aWaitMs and 1 s to read and
# render the answer; a card, the Agent list, the keys route or a callback about a second, a cold start included.
SHORT_REQUEST_SECONDS = 1.0
# HTTP API throttling is a token bucket (https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-throttling.html):
# a full bucket lets `burst` requests in at once, then `rate` a second, so a route holds at most
# burst + rate x hold instances (each route counted with its own bucket: the most the stage's default can allow).
HTTP_API_THROTTLING = "https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-throttling.html"


def _value(node: Any, tpl: dict[str, Any], key: str) -> float:
    """A number as deployed with the parameters' `key` (Default or MaxValue); an If counts its larger branch."""
    if isinstance(node, dict) and "Fn::If" in node:
        branches = [b for b in node["Fn::If"][1:] if b != {"Ref": "AWS::NoValue"}]
        return max((_value(b, tpl, key) for b in branches), default=0.0)
    if isinstance(node, dict) and "Ref" in node:
        return float(tpl["Parameters"][node["Ref"]].get(key, float("inf")))
    return float(node)


def _functions(tpl: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n: r for n, r in tpl["Resources"].items() if r.get("Type") == "AWS::Serverless::Function"}


def reservation_problems(tpl: dict[str, Any]) -> list[str]:
    """Every reservation is opt-in (0 by default), and all of them at their most leave 100 of a default account."""
    reservations = {
        name: res["Properties"]["ReservedConcurrentExecutions"]
        for name, res in _functions(tpl).items()
        if "ReservedConcurrentExecutions" in res.get("Properties", {})
    }
    problems = [
        f"{name} reserves {_value(node, tpl, 'Default'):g} by default: the deploy fails in an account whose "
        f"quota is under {UNRESERVED_MINIMUM} + that ({LAMBDA_RESERVED})"
        for name, node in reservations.items()
        if _value(node, tpl, "Default") > 0
    ]
    most = sum(_value(node, tpl, "MaxValue") for node in reservations.values())
    if most + UNRESERVED_MINIMUM > DEFAULT_ACCOUNT_CONCURRENCY:
        problems.append(
            f"reservations may reach {most:g}, and {most:g} + {UNRESERVED_MINIMUM} is over a default account's "
            f"{DEFAULT_ACCOUNT_CONCURRENCY} ({LAMBDA_RESERVED})"
        )
    return problems


def api_routes(tpl: dict[str, Any]) -> list[tuple[str, float, float, float]]:
    """(event, rate, burst, seconds held) of every route to the api function, at the parameters' defaults."""
    api = tpl["Resources"]["ApiFunction"]["Properties"]
    stage = tpl["Resources"]["HttpApi"]["Properties"].get("DefaultRouteSettings", {})
    wait = float(tpl["Parameters"]["A2aWaitMs"]["Default"]) / 1000
    routes = []
    for event_name, event in api.get("Events", {}).items():
        if event.get("Type") != "HttpApi":
            continue
        props = event["Properties"]
        own = {**stage, **props.get("RouteSettings", {})}
        rate = _value(own.get("ThrottlingRateLimit", 10_000), tpl, "Default")
        burst = _value(own.get("ThrottlingBurstLimit", 5_000), tpl, "Default")
        blocking = props["Method"].upper() == "POST" and props["Path"].startswith(A2A_PATH + "/")
        routes.append(
            (event_name, rate, burst, wait + SHORT_REQUEST_SECONDS if blocking else SHORT_REQUEST_SECONDS)
        )
    return routes


def api_peak(tpl: dict[str, Any]) -> float:
    return sum(burst + rate * held for _, rate, burst, held in api_routes(tpl))


def api_load_problems(tpl: dict[str, Any]) -> list[str]:
    """At the defaults, the api function's most instances at once fit its share of a default account."""
    peak = api_peak(tpl)
    if peak <= API_SHARE:
        return []
    detail = ", ".join(f"{n} {b:g} + {r:g} x {h:g} s" for n, r, b, h in api_routes(tpl))
    share = f"its {API_SHARE} of a default account's {DEFAULT_ACCOUNT_CONCURRENCY}"
    message = (
        f"the api function may run {peak:g} instances at once at the defaults ({detail}), over {share} "
        f"({HTTP_API_THROTTLING}, {LAMBDA_QUOTAS})"
    )
    return [message]
