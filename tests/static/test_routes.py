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
    """Issue 15: the keys route hands out secrets, so API Gateway's JWT authorizer must check the token first
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
