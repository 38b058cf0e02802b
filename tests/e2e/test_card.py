"""End to end, raw HTTP: the Agent Card (docs/protocol.md §9, Profile v2 "Card" in docs/profile.md §3), unknown agents, and the
`A2A-Extensions` response header (docs/protocol.md §3)."""

from __future__ import annotations

from collections.abc import Callable
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
import pytest
from conftest import auth
from nylorun_local.runtime import LocalRuntime

pytestmark = pytest.mark.e2e

CARD_PATH = "/.well-known/agent-card.json"
EXTENSIONS = [
    "https://docs.nylorun.com/a2a/interactions/v1",
    "https://docs.nylorun.com/a2a/effects/v1",
    "https://docs.nylorun.com/a2a/progress/v1",
    "https://docs.nylorun.com/a2a/telemetry/v1",
    "https://docs.nylorun.com/a2a/files/v1",
]
INTERACTIONS, EFFECTS, PROGRESS, TELEMETRY, FILES = EXTENSIONS
LIST_TASKS = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"pageSize": 1}}


def get_card(agent_url: str, **headers: str) -> httpx.Response:
    return httpx.get(agent_url + CARD_PATH, headers=headers, timeout=30)


@pytest.fixture(params=["echo", "tck"])
def agent(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture()
def card(agent_url: Callable[[str], str], agent: str) -> dict[str, Any]:
    response = get_card(agent_url(agent))
    assert response.status_code == 200, response.text
    return dict(response.json())


# ---------------------------------------------------------------------------------------------- caching
def test_card_is_served_with_caching_headers(agent_url: Callable[[str], str], agent: str) -> None:
    # When
    response = get_card(agent_url(agent))
    # Then: card caching (docs/protocol.md §9.5): Cache-Control max-age, ETag, Last-Modified
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert "max-age=" in response.headers["cache-control"]
    etag = response.headers["etag"]
    assert etag.startswith('"') and etag.endswith('"') and len(etag) > 2
    assert parsedate_to_datetime(response.headers["last-modified"]).tzinfo is not None


def test_if_none_match_with_the_etag_is_304_without_a_body(
    agent_url: Callable[[str], str], agent: str
) -> None:
    # Given
    first = get_card(agent_url(agent))
    etag = first.headers["etag"]
    # When
    again = get_card(agent_url(agent), **{"If-None-Match": etag})
    # Then
    assert again.status_code == 304
    assert again.content == b""
    assert again.headers["etag"] == etag


def test_if_none_match_with_another_etag_serves_the_card(agent_url: Callable[[str], str]) -> None:
    # When
    response = get_card(agent_url("echo"), **{"If-None-Match": '"not-the-etag"'})
    # Then
    assert response.status_code == 200
    assert response.json()["name"] == "echo"


def test_each_agent_has_its_own_etag(agent_url: Callable[[str], str]) -> None:
    # When
    echo = get_card(agent_url("echo"))
    tck = get_card(agent_url("tck"))
    # Then: a cached echo card must not validate as the tck card
    assert echo.headers["etag"] != tck.headers["etag"]
    assert get_card(agent_url("tck"), **{"If-None-Match": echo.headers["etag"]}).status_code == 200


# ---------------------------------------------------------------------------------------------- content
def test_card_has_every_required_field(card: dict[str, Any], agent: str) -> None:
    # Then: the required fields, and none of the 0.3 top-level fields (docs/protocol.md §9.2)
    assert card["name"] == agent
    for field in ("description", "version"):
        assert isinstance(card[field], str) and card[field]
    for field in ("defaultInputModes", "defaultOutputModes"):
        assert card[field] and all(isinstance(mode, str) and "/" in mode for mode in card[field])
    for removed in ("url", "preferredTransport", "additionalInterfaces", "protocolVersion"):
        assert removed not in card


def test_card_has_exactly_one_jsonrpc_1_0_interface_at_this_agents_url(
    card: dict[str, Any], agent: str, local_runtime: LocalRuntime
) -> None:
    # Then: Profile v2: JSON-RPC, A2A 1.0 only, at an absolute URL on the host the caller used
    assert card["supportedInterfaces"] == [
        {
            # An Agent's URL ends with "/", so relative references (`.well-known/agent-card.json`) stay in it.
            "url": f"{local_runtime.base_url}/v1/a2a/agents/{agent}/",
            "protocolBinding": "JSONRPC",
            "protocolVersion": "1.0",
        }
    ]


def test_the_interface_url_is_built_from_the_request_host(
    local_runtime: LocalRuntime, agent_url: Callable[[str], str]
) -> None:
    # Given: a deployment with no fixed public base URL
    assert local_runtime.runtime is not None
    if local_runtime.runtime.settings.public_base_url:
        pytest.skip("NYLORUN_PUBLIC_BASE_URL fixes the card's URL")
    # When: the card is asked for through another host name, and through an https proxy
    plain = get_card(agent_url("echo"), Host="agents.example.test:8443").json()
    proxied = get_card(agent_url("echo"), Host="agents.example.test", **{"X-Forwarded-Proto": "https"}).json()
    # Then
    assert plain["supportedInterfaces"][0]["url"] == "http://agents.example.test:8443/v1/a2a/agents/echo/"
    assert proxied["supportedInterfaces"][0]["url"] == "https://agents.example.test/v1/a2a/agents/echo/"


def test_the_interface_url_answers_json_rpc(card: dict[str, Any]) -> None:
    # When: a caller POSTs to the card's URL exactly as written (what the a2a-sdk does)
    response = httpx.post(card["supportedInterfaces"][0]["url"], json=LIST_TASKS, headers=auth(), timeout=30)
    # Then
    assert response.status_code == 200
    assert "result" in response.json()


def test_capabilities_say_no_streaming_push_on_and_the_five_extensions(card: dict[str, Any]) -> None:
    capabilities = card["capabilities"]
    # Then: proto3 optional bools are sent even when false (docs/protocol.md §4.5)
    assert capabilities["streaming"] is False
    assert capabilities["pushNotifications"] is True  # the local Runtime has a push secret
    assert capabilities.get("extendedAgentCard", False) is False
    uris = [extension["uri"] for extension in capabilities["extensions"]]
    assert sorted(uris) == sorted(EXTENSIONS)
    assert len(uris) == len(set(uris))
    for extension in capabilities["extensions"]:
        assert extension.get("required", False) is False, extension
        assert isinstance(extension.get("description"), str) and extension["description"]


def test_card_polish_documentation_icon_and_provider(card: dict[str, Any]) -> None:
    # Then: documentationUrl, iconUrl and provider, so a directory can show the Agent (docs/protocol.md §9.2)
    assert card["documentationUrl"].startswith("https://")
    assert card["iconUrl"].startswith("https://")
    assert card["provider"]["organization"]
    assert card["provider"]["url"].startswith("https://")


def test_skills_have_id_name_description_and_tags(card: dict[str, Any]) -> None:
    # Then: all four are required for each skill (docs/protocol.md §9.3)
    assert card["skills"]
    ids = [skill["id"] for skill in card["skills"]]
    assert len(ids) == len(set(ids))
    for skill in card["skills"]:
        for field in ("id", "name", "description"):
            assert isinstance(skill[field], str) and skill[field], skill
        assert skill["tags"] and all(isinstance(tag, str) and tag for tag in skill["tags"]), skill


def test_security_scheme_is_bearer_and_required(card: dict[str, Any]) -> None:
    # Then: dev auth is a bearer token; the card says so in A2A 1.0 form (docs/protocol.md §9.4)
    scheme = card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]
    assert scheme["scheme"].lower() == "bearer"
    assert {"schemes": {"bearer": {"list": []}}} in card["securityRequirements"]


# ---------------------------------------------------------------------------------------------- unknown agent
@pytest.mark.parametrize("name", ["nope", "ECHO", "echo%20", "..%2Fecho"])
def test_an_unknown_agent_is_404_for_card_and_rpc(local_runtime: LocalRuntime, name: str) -> None:
    # Given
    url = f"{local_runtime.base_url}/v1/a2a/agents/{name}"
    # When
    card = httpx.get(url + CARD_PATH, timeout=30)
    call = httpx.post(url, json=LIST_TASKS, headers=auth(), timeout=30)
    anonymous_call = httpx.post(url, json=LIST_TASKS, timeout=30)
    # Then
    assert card.status_code == 404
    assert call.status_code == 404
    assert anonymous_call.status_code == 404
    assert "Traceback" not in card.text + call.text


# ---------------------------------------------------------------------------------------------- A2A-Extensions
def activated(response: httpx.Response) -> list[str] | None:
    """The URIs of the response's A2A-Extensions header(s), or None when there is none."""
    values = response.headers.get_list("a2a-extensions")
    if not values:
        return None
    return [uri.strip() for value in values for uri in value.split(",") if uri.strip()]


def call_with_extensions(url: str, *values: str) -> httpx.Response:
    headers = list(auth().items()) + [("A2A-Extensions", value) for value in values]
    response = httpx.post(url, json=LIST_TASKS, headers=headers, timeout=30)
    assert response.status_code == 200
    assert "result" in response.json(), response.text
    return response


@pytest.mark.parametrize(
    ("sent", "expected"),
    [
        pytest.param([TELEMETRY], [TELEMETRY], id="one"),
        pytest.param([f"{FILES},{INTERACTIONS}"], [INTERACTIONS, FILES], id="comma-separated"),
        pytest.param(
            [f"{PROGRESS} ,   {EFFECTS}\t,{TELEMETRY}"], [EFFECTS, PROGRESS, TELEMETRY], id="whitespace"
        ),
        pytest.param([f"{FILES}, https://example.com/ext/unknown/v1"], [FILES], id="unknown-dropped"),
        pytest.param([INTERACTIONS, f"{FILES}, urn:nobody"], [INTERACTIONS, FILES], id="header-repeated"),
        pytest.param([f"{FILES},{FILES}", FILES], [FILES], id="duplicates-once"),
        pytest.param([", ".join(EXTENSIONS)], EXTENSIONS, id="all-five"),
        pytest.param(["https://docs.nylorun.com/a2a/files/v2"], None, id="other-version-not-activated"),
        pytest.param(["https://example.com/ext/unknown/v1, urn:x"], None, id="only-unknown"),
        pytest.param([], None, id="none"),
    ],
)
def test_the_response_lists_exactly_the_activated_extensions(
    agent_url: Callable[[str], str], sent: list[str], expected: list[str] | None
) -> None:
    # When
    response = call_with_extensions(agent_url("echo"), *sent)
    # Then: docs/protocol.md §3.3: the agent echoes what it activated, and only declared URIs are activated
    got = activated(response)
    if expected is None:
        assert got is None, response.headers
    else:
        assert got is not None, response.headers
        assert sorted(got) == sorted(expected)
        assert len(got) == len(set(got))


@pytest.mark.parametrize("slash", ["", "/"], ids=["no-slash", "slash"])
def test_the_agent_answers_json_rpc_with_and_without_a_trailing_slash(
    agent_url: Callable[[str], str], slash: str
) -> None:
    # When: a JSON-RPC client POSTs to the Agent's URL spelled either way (the A2A TCK adds the slash)
    response = httpx.post(agent_url("echo") + slash, json=LIST_TASKS, headers=auth(), timeout=30)
    # Then: the answer itself, never a redirect (no client re-sends a POST to a Location)
    assert response.status_code == 200, response.text
    assert "result" in response.json()


@pytest.mark.parametrize("path", ["/.well-known/agent-card.json", "/"], ids=["card", "json-rpc"])
def test_no_route_answers_a_redirect(agent_url: Callable[[str], str], path: str) -> None:
    # When: the card and the list are asked for with the other spelling of their paths
    for url in (agent_url("echo") + path, agent_url("echo").rsplit("/", 1)[0], agent_url("echo").rsplit("/", 1)[0] + "/"):
        response = httpx.get(url, follow_redirects=False, timeout=30)
        # Then
        assert response.status_code not in (301, 302, 307, 308), (url, response.status_code)


def test_a_card_resolved_one_level_up_says_where_the_agents_cards_are(agent_url: Callable[[str], str]) -> None:
    # Given: the URL a relative resolver (URL rules) makes from an Agent URL written without its slash
    parent = agent_url("echo").rsplit("/", 1)[0]
    # When
    response = httpx.get(parent + "/.well-known/agent-card.json", timeout=30)
    # Then: not a guess at one Agent's card, but a 404 that names the Agents' URLs (with their slash)
    assert response.status_code == 404
    body = response.json()
    assert parent + "/echo/" in body["agents"]
    assert "end" in body["error"] and "/" in body["error"]
