"""The HTTP API's routes take every URL the Runtime publishes: an Agent's URL (with its trailing slash, as cards
and `GET /v1/a2a/agents` give it, and without), its card, and the list. The API answers 404 itself for a path no
route matches, before any function runs, so a card URL the routes miss is an Agent nobody can call.

Route matching as API Gateway documents it for HTTP APIs
(https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-develop-routes.html): a `{name}` variable
takes one path segment, a greedy `{name+}` (last only) takes the rest, other segments match exactly. Whether a
trailing slash is dropped before matching is not documented, so it is not assumed here.
"""

from __future__ import annotations

import copy
import fnmatch
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from nylorun.api.app import PUSH_SIGNING_PATH
from nylorun.profile.card import A2A_PATH, agent_url
from nylorun_client.webhooks import signing_secrets_url
from nylorun_local import template

BASE = "https://abc123.execute-api.us-east-1.amazonaws.com"


def routes(tpl: dict[str, Any]) -> list[tuple[str, str]]:
    """(method, path) of every HttpApi event of every function."""
    found = []
    for res in tpl["Resources"].values():
        for event in (res.get("Properties") or {}).get("Events", {}).values():
            if event.get("Type") == "HttpApi":
                found.append((event["Properties"]["Method"].upper(), event["Properties"]["Path"]))
    return found


def matches(route: str, path: str) -> bool:
    want, got = route.strip("/").split("/"), path.removeprefix(BASE).lstrip("/").split("/")
    for i, part in enumerate(want):
        if part.startswith("{") and part.endswith("+}"):
            return i < len(got) and any(got[i:])  # greedy: the rest, at least one non-empty segment
        if i >= len(got) or not got[i] or (got[i] != part and not part.startswith("{")):
            return False
    return len(got) == len(want)


def routed(tpl: dict[str, Any], method: str, url: str) -> bool:
    return any(m == method and matches(path, url) for m, path in routes(tpl))


PUBLISHED = [
    ("POST", agent_url(BASE, "echo"), "an Agent's URL, as its card gives it"),
    ("POST", agent_url(BASE, "echo").rstrip("/"), "an Agent's URL without the slash"),
    ("GET", agent_url(BASE, "echo") + ".well-known/agent-card.json", "an Agent's card"),
    ("GET", BASE + A2A_PATH, "the list of Agents"),
    ("GET", BASE + PUSH_SIGNING_PATH, "a caller's push signing keys"),
    ("GET", signing_secrets_url(agent_url(BASE, "echo")), "where `nylorun webhooks --from` looks for them"),
]


@pytest.mark.parametrize(("method", "url", "what"), PUBLISHED, ids=[w for _, _, w in PUBLISHED])
def test_every_url_the_runtime_publishes_has_a_route(method: str, url: str, what: str) -> None:
    # Given the template's HTTP API routes
    tpl = template.load_template(template.TEMPLATE)
    # Then the published URL reaches a function
    assert routed(tpl, method, url), f"{what}: {method} {url} matches none of {routes(tpl)}"


def test_a_single_segment_route_misses_the_agent_url_the_cards_publish() -> None:
    # Given a broken copy whose JSON-RPC route takes one segment (the template before this check)
    tpl = copy.deepcopy(template.load_template(template.TEMPLATE))
    for res in tpl["Resources"].values():
        for event in (res.get("Properties") or {}).get("Events", {}).values():
            if event.get("Type") == "HttpApi" and event["Properties"]["Method"] == "POST":
                event["Properties"]["Path"] = A2A_PATH + "/{agent}"
    # Then the URL a card publishes is not routed, while the one without the slash still is
    assert not routed(tpl, "POST", agent_url(BASE, "echo"))
    assert routed(tpl, "POST", agent_url(BASE, "echo").rstrip("/"))


def signing_route_problems(tpl: dict[str, Any]) -> list[str]:
    """The keys route hands out secrets, so API Gateway's JWT authorizer must check the token first
    (the api function then takes the subject from the verified claims)."""
    api = tpl["Resources"]["HttpApi"]["Properties"]["Auth"]
    events = [
        event["Properties"]
        for res in tpl["Resources"].values()
        for event in (res.get("Properties") or {}).get("Events", {}).values()
        if event.get("Type") == "HttpApi" and event["Properties"]["Path"] == PUSH_SIGNING_PATH
    ]
    if len(events) != 1:
        return [f"{len(events)} routes for {PUSH_SIGNING_PATH}"]
    authorizer = (events[0].get("Auth") or {}).get("Authorizer", api.get("DefaultAuthorizer"))
    jwt = [name for name, spec in api["Authorizers"].items() if "JwtConfiguration" in spec]
    return [] if authorizer in jwt else [f"{PUSH_SIGNING_PATH} is served with authorizer {authorizer!r}"]


def _without_authorizer(tpl: dict[str, Any]) -> dict[str, Any]:
    events = tpl["Resources"]["ApiFunction"]["Properties"]["Events"]
    events["PushSigningSecrets"]["Properties"]["Auth"] = {"Authorizer": "NONE"}
    return tpl


@pytest.mark.parametrize(
    ("edit", "problem"),
    [(lambda t: t, None), (_without_authorizer, "served with authorizer 'NONE'")],
    ids=["template", "broken copy: no authorizer"],
)
def test_the_push_signing_keys_route_is_behind_the_jwt_authorizer(edit: Any, problem: str | None) -> None:
    # Given the template (or a copy that lets anyone ask)
    tpl = edit(copy.deepcopy(template.load_template(template.TEMPLATE)))
    # Then only the copy is reported
    problems = signing_route_problems(tpl)
    assert problems == [] if problem is None else any(problem in p for p in problems), problems


# ---------------------------------------------------------------- as SAM transforms it (what CloudFormation deploys)
ROOT = Path(__file__).resolve().parents[2]
SAM_PYTHON = ROOT / ".venv-sam" / "bin" / "python"  # `make test` installs it first ($(SAM_STAMP))
API_ID = "abc123"
# Invocation ARNs: arn:partition:execute-api:region:account-id:api-id/stage/METHOD/path
# (https://docs.aws.amazon.com/apigateway/latest/developerguide/arn-format-reference.html); an HTTP API's stage here
# is SAM's `$default`.
INVOKED = "arn:aws:execute-api:us-east-1:123456789012:" + API_ID + "/$default/"
PSEUDO = {
    "AWS::Partition": "aws",
    "AWS::Region": "us-east-1",
    "AWS::AccountId": "123456789012",
    "HttpApi": API_ID,
}
CALLBACK = ("POST", BASE + "/v1/a2a/delegations/task-1/key-1", "a delegate's callback")


def _sam_transform(tpl: dict[str, Any], folder: Path) -> dict[str, Any]:
    """The template as SAM's translator expands it, run in SAM CLI's venv (tests/static/sam_iam_check.py)."""
    assert SAM_PYTHON.exists(), "SAM CLI's venv is missing: `make test` installs it ($(SAM_STAMP))"
    path = folder / "template.json"  # JSON is YAML: SAM reads the long forms (Ref, Fn::Sub) as the short tags
    path.write_text(json.dumps(tpl))
    result = subprocess.run(
        [str(SAM_PYTHON), str(ROOT / "tests/static/sam_iam_check.py"), "--transformed", str(path)],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return dict(json.loads(result.stdout))


def _as_before(tpl: dict[str, Any]) -> dict[str, Any]:
    """The template before the unauthenticated routes had their own throttling and the JSON-RPC route its permission."""
    tpl["Resources"].pop("RpcRoutePermission", None)
    for event in tpl["Resources"]["ApiFunction"]["Properties"]["Events"].values():
        event["Properties"].pop("RouteSettings", None)
    return tpl


@pytest.fixture(scope="module")
def transformed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    edits = {"template": lambda t: t, "before": _as_before}
    return {
        name: _sam_transform(edit(copy.deepcopy(template.load_template(template.TEMPLATE))), tmp_path_factory.mktemp(name))
        for name, edit in edits.items()
    }  # fmt: skip


def _rendered(source_arn: Any) -> str:
    """A permission's SourceArn with this stack's names (SAM writes Fn::Sub with or without its own variables)."""
    text, local = (
        (source_arn["Fn::Sub"], {}) if isinstance(source_arn["Fn::Sub"], str) else source_arn["Fn::Sub"]
    )
    names = {**PSEUDO, **{k: PSEUDO[v["Ref"]] if isinstance(v, dict) else v for k, v in local.items()}}
    return re.sub(r"\$\{([^}]+)\}", lambda m: names[m.group(1)], text)


def arn_like(pattern: str, arn: str) -> bool:
    """IAM's ArnLike: each of the six colon-separated parts matched on its own, `*` and `?` within it
    (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html#Conditions_ARN)."""
    want, got = pattern.split(":", 5), arn.split(":", 5)
    return len(want) == len(got) == 6 and all(
        fnmatch.fnmatchcase(g, w) for w, g in zip(want, got, strict=True)
    )


def permission_problems(cfn: dict[str, Any], calls: list[tuple[str, str, str]]) -> list[str]:
    """Each call, as API Gateway invokes the api function for it, is allowed by one of the function's permissions."""
    arns = [
        _rendered(res["Properties"]["SourceArn"])
        for res in cfn["Resources"].values()
        if res["Type"] == "AWS::Lambda::Permission"
        and res["Properties"]["FunctionName"] == {"Ref": "ApiFunction"}
        and res["Properties"]["Principal"] == "apigateway.amazonaws.com"
    ]
    problems = []
    for method, url, what in calls:
        invoked = INVOKED + method + url.removeprefix(BASE)
        if not any(arn_like(arn, invoked) for arn in arns):
            problems.append(
                f"{invoked} ({what}): no permission lets API Gateway invoke the api function (have {arns})"
            )
    return problems


CALLS = [(method, url, what) for method, url, what in PUBLISHED] + [CALLBACK]


def test_api_gateway_may_invoke_the_api_function_for_every_published_url(transformed: dict[str, Any]) -> None:
    # Given the template as SAM transforms it (SAM's own permission for `{agent+}` keeps the variable literally)
    # When each URL the Runtime publishes is invoked as API Gateway invokes it, the Agent's URL with its slash too
    problems = permission_problems(transformed["template"], CALLS)
    # Then a permission allows each
    assert problems == []


def test_the_permission_check_fails_on_the_template_without_the_json_rpc_route_s_permission(
    transformed: dict[str, Any],
) -> None:
    # Given the template as it was: only SAM's permissions
    # When checked
    problems = permission_problems(transformed["before"], CALLS)
    # Then the Agent's URL (`POST/v1/a2a/agents/echo/`, with and without the slash) is the one not allowed
    assert [p.split(" ")[0] for p in problems] == [
        INVOKED + "POST/v1/a2a/agents/echo/", INVOKED + "POST/v1/a2a/agents/echo",
    ]  # fmt: skip


def _default(cfn: dict[str, Any], node: Any) -> float:
    return float(cfn["Parameters"][node["Ref"]]["Default"]) if isinstance(node, dict) else float(node)


def throttling_problems(cfn: dict[str, Any]) -> list[str]:
    """Every route without login has its own stage route settings (parameters), no looser than the authenticated
    routes' defaults, and every route setting names a route (or CloudFormation fails creating the stage)."""
    (stage,) = [r["Properties"] for r in cfn["Resources"].values() if r["Type"] == "AWS::ApiGatewayV2::Stage"]
    body = cfn["Resources"]["HttpApi"]["Properties"]["Body"]
    keys = {f"{m.upper()} {p}": op for p, ops in body["paths"].items() for m, op in ops.items()}
    own, default = stage.get("RouteSettings", {}), stage.get("DefaultRouteSettings", {})
    problems = [f"RouteSettings {key!r} names no route" for key in own if key not in keys]
    for key, op in keys.items():
        if op.get("security") not in ([{"NONE": []}], [], None):
            continue
        for limit in ("ThrottlingRateLimit", "ThrottlingBurstLimit"):
            value = own.get(key, {}).get(limit)
            if not (isinstance(value, dict) and "Ref" in value):
                problems.append(f"{key}: no login, and no {limit} parameter of its own (shares the stage's)")
            elif _default(cfn, value) > _default(cfn, default[limit]):
                problems.append(f"{key}: {limit} default is above the authenticated routes'")
    return problems


def test_the_routes_without_login_are_throttled_apart(transformed: dict[str, Any]) -> None:
    # Given the template as SAM transforms it: the stage's route settings, and the routes' authorizers
    # When the routes anyone may call without a token are looked up in the stage's route settings
    problems = throttling_problems(transformed["template"])
    # Then each has limits of its own (so a flood there gets 429 there), and each setting names a real route
    assert problems == []


def test_the_throttling_check_fails_on_the_template_whose_open_routes_share_the_stage_s_limits(
    transformed: dict[str, Any],
) -> None:
    # Given the template as it was
    problems = throttling_problems(transformed["before"])
    # Then the routes without login are named
    assert sorted({p.split(":")[0] for p in problems}) == [
        "GET /v1/a2a/agents", "GET /v1/a2a/agents/{agent}/.well-known/agent-card.json",
        "GET /v1/a2a/connections/callback", "GET /v1/a2a/connections/start", "POST /v1/a2a/connections/confirm",
        "POST /v1/a2a/delegations/{taskId}/{key}",
    ]  # fmt: skip
