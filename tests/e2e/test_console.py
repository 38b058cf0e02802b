"""The console in a real headless Chromium: a person works with Agents by clicking, against the local Runtime (push
mode), a core-tier a2a-sdk reference server (polling), and an Agent whose words are hostile HTML. Every request the
page makes goes to the console's own origin (checked after each test)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import html_agent
import httpx
import pytest
from chromium import browser, served
from conftest import ALICE, auth, held_agent, rpc, user_message
from consent import disconnect
from core_agent import QUESTION, core_app
from nylorun_client.console import console_app
from nylorun_local.runtime import LocalRuntime

INTERACTIONS = "https://docs.nylorun.com/a2a/interactions/v1"

pytestmark = pytest.mark.e2e
KEY = "test-console-key"


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with browser() as launched:
        yield launched


@pytest.fixture(scope="module")
def console_url() -> Iterator[str]:
    with served(console_app(KEY)) as url:
        yield url


@contextmanager
def core_served() -> Iterator[str]:
    holder: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:  # the card names its own URL, known once served
        await holder["app"](scope, receive, send)

    with served(app) as url:
        holder["app"] = core_app(url + "/")
        yield url


@pytest.fixture(scope="module")
def core_url() -> Iterator[str]:
    with core_served() as url:
        yield url


@pytest.fixture(scope="module")
def hold(local_runtime: LocalRuntime) -> threading.Event:
    event = threading.Event()
    held_agent(local_runtime, "t-console-held", event)
    local_runtime.add_agent(html_agent.agent)
    return event


@pytest.fixture()
def page(chromium: Any, console_url: str) -> Iterator[Any]:
    context = chromium.new_context(viewport={"width": 1100, "height": 900})
    opened = context.new_page()
    requested: list[str] = []
    opened.on("request", lambda request: requested.append(request.url))
    opened.goto(f"{console_url}/?k={KEY}")
    yield opened
    # Then: the page fetched nothing from any origin but the console's own
    assert [url for url in requested if not url.startswith(console_url + "/")] == []
    context.close()


def connect(page: Any, url: str, token: str = ALICE) -> None:
    page.fill("#url", url)
    page.fill("#token", token)
    page.click("#connect-form button[type=submit]")
    page.locator("#converse").wait_for(state="visible")


def send(page: Any, text: str) -> None:
    page.fill("#message", text)
    page.press("#message", "Enter")  # Enter sends


def expect_state(page: Any, state: str) -> None:
    from playwright.sync_api import expect

    expect(page.locator("#task-state")).to_have_text(state, timeout=30_000)


def consent_in_a_new_tab(page: Any, prompt: str, for_whom: str = "alice") -> None:
    """docs/writing/connections.md: click Connect, and in the tab it opens confirm the Runtime's page (naming
    whom it is for), Allow on the example provider's consent page, and read "Connected"; the tab is closed."""
    from playwright.sync_api import expect

    connection = page.locator("form.interaction.connection")
    expect(connection).to_contain_text(prompt, timeout=60_000)
    with page.context.expect_page() as opened:
        connection.locator("button", has_text="opens a new tab").click()
    tab = opened.value
    expect(tab.locator("body")).to_contain_text(f"on behalf of {for_whom}.")
    tab.locator("button", has_text="Connect Example Payments").click()
    tab.locator("button", has_text="Allow").click()
    expect(tab.locator("body")).to_contain_text("Connected. You can close this page")
    tab.close()


def test_support_walk_by_clicking_question_connection_text_yes_then_approve(
    page: Any, agent_url: Callable[[str], str], local_runtime: LocalRuntime
) -> None:
    from playwright.sync_api import expect

    disconnect(local_runtime.base_url, ALICE)  # connections outlive tasks: this walk connects afresh

    # Given: the console connected to the local Runtime's support Agent, with the token typed in the form
    connect(page, agent_url("support") + "/.well-known/agent-card.json")
    expect(page.locator("#card")).to_contain_text("JSON-RPC 1.0 interface")
    expect(page.locator("#card")).to_contain_text("required: false")
    expect(page.locator("#live-mode")).to_contain_text("pushes from the Agent")
    # When: the person asks for a refund and answers the question in its form
    send(page, "I want a refund")
    question = page.locator("form.interaction.question")
    expect(question).to_contain_text("Which order should I refund?", timeout=30_000)
    question.locator("input").fill("A-1001")
    question.locator("button", has_text="Answer").click()
    # Then: the connection is asked for; the person connects in the tab its Connect button opens, and the task
    # goes on to the approval by itself (nobody clicks anything more in the console)
    consent_in_a_new_tab(page, "Connect your payments account")
    approval = page.locator("form.interaction.approval")
    expect(approval).to_contain_text("A-1001", timeout=30_000)
    # When: the person types "yes" as text
    send(page, "yes")
    # Then: the text approves nothing: the task is still AUTH_REQUIRED with Approve on screen
    expect(page.locator("#history")).to_contain_text("You: yes", timeout=30_000)
    expect_state(page, "AUTH_REQUIRED")
    expect(page.locator("form.interaction.approval button", has_text="Approve")).to_be_enabled()
    # When: the person clicks Approve
    page.locator("form.interaction.approval button", has_text="Approve").click()
    # Then: COMPLETED, with the receipt (sha256), the timeline and the telemetry drawn
    expect_state(page, "COMPLETED")
    expect(page.locator(".artifact")).to_contain_text("sha256")
    expect(page.locator("ol.timeline")).to_be_visible()
    expect(page.locator("dl.telemetry")).to_contain_text("trace id")
    expect(page.locator("ol.plan li.done").first).to_be_visible()
    # And: the drawer holds the raw exchanges with A2A-Version and A2A-Extensions, and the token never reached the page
    expect(page.locator("#exchanges")).to_contain_text('"a2a-extensions"')
    expect(page.locator("#exchanges")).to_contain_text("push delivery")
    assert ALICE not in page.content()
    assert page.evaluate("document.cookie + JSON.stringify(localStorage) + JSON.stringify(sessionStorage)") == "{}{}"


def test_orders_table_is_drawn(page: Any, agent_url: Callable[[str], str]) -> None:
    from playwright.sync_api import expect

    # Given / When
    connect(page, agent_url("orders"))
    send(page, "list my orders")
    # Then: a table with its header row and one row per order, cell by cell (not the text fallback)
    expect_state(page, "COMPLETED")
    table = page.locator("figure.component.table table")
    expect(table.locator("thead th")).to_have_text(["Order", "Item", "Amount"])
    expect(table.locator("tbody tr").first.locator("td").first).to_have_text("A-1001")
    expect(table.locator("tbody tr").first.locator("td")).to_have_count(3)


def test_refunds_shows_the_delegated_interactions_as_its_own(
    page: Any, agent_url: Callable[[str], str], local_runtime: LocalRuntime
) -> None:
    from playwright.sync_api import expect

    # Given: alice has not connected payments through refunds
    disconnect(local_runtime.base_url, next(iter(local_runtime.agent_tokens)), on_behalf_of="alice")
    connect(page, agent_url("refunds"))
    # When
    send(page, "Refund order A-1002")
    expect(page.locator("#task-state")).not_to_have_text("", timeout=30_000)
    task_id = page.locator("#task-id").inner_text()
    # Then: support's connection, then its approval, are forms on refunds' own task
    expect(page.locator("form.interaction.connection")).to_contain_text("Connect your payments account", timeout=60_000)
    expect(page.locator("#task-id")).to_have_text(task_id)
    consent_in_a_new_tab(page, "Connect your payments account", for_whom="agent:refunds, for the person who asked it")
    approval = page.locator("form.interaction.approval")
    expect(approval).to_contain_text("A-1002", timeout=60_000)
    expect(page.locator("#task-id")).to_have_text(task_id)
    # When: the person denies it
    approval.locator("button", has_text="Deny").click()
    # Then: refunds' own task ends in its own words, and nothing of support is shown
    expect_state(page, "COMPLETED")
    expect(page.locator("#task-id")).to_have_text(task_id)
    expect(page.locator(".status-text")).to_have_text("Order A-1002 was not refunded: you declined it; nothing was changed.")
    expect(page.locator("#task")).not_to_contain_text("support")


def test_cancel_and_reopen_from_the_task_list(page: Any, agent_url: Callable[[str], str], hold: threading.Event) -> None:
    from playwright.sync_api import expect

    # Given: a task that holds its turn
    connect(page, agent_url("t-console-held"))
    send(page, "hold on")
    expect(page.locator("#task-state")).to_have_text("WORKING", timeout=30_000)
    task_id = page.locator("#task-id").inner_text()
    # When: the person clicks Cancel
    page.click("#cancel")
    # Then
    expect_state(page, "CANCELED")
    # When: they start a new conversation, list the canceled tasks and click the first
    page.click("#new-conversation")
    page.select_option("#filter-state", "TASK_STATE_CANCELED")
    page.click("#filters button[type=submit]")
    page.locator("#task-list button").first.click()
    # Then: the task is open again, its messages and its context's turns shown
    expect(page.locator("#task")).to_be_visible()
    expect(page.locator("#task-id")).to_have_text(task_id)
    expect(page.locator("#task-state")).to_have_text("CANCELED")
    expect(page.locator("#history")).to_contain_text("You: hold on")
    expect(page.locator("#turns li")).to_have_count(1)


def test_core_tier_agent_asks_in_text_and_gets_no_buttons(page: Any, core_url: str) -> None:
    from playwright.sync_api import expect

    # Given: the a2a-sdk reference server (no Profile extension)
    connect(page, core_url + "/")
    expect(page.locator("#tier")).to_contain_text("Core tier")
    expect(page.locator("#live-mode")).to_contain_text("polling GetTask")
    # When
    send(page, "hello")
    # Then: the question is text, answered in the message box; no interaction buttons
    expect(page.locator(".status-text")).to_have_text(QUESTION, timeout=30_000)
    expect(page.locator("#task-state")).to_have_text("INPUT_REQUIRED")
    assert page.locator("form.interaction").count() == 0
    assert page.get_by_role("button", name="Approve").count() == 0
    send(page, "blue")
    expect_state(page, "COMPLETED")
    expect(page.locator(".status-text")).to_have_text("You like blue.")
    # The drawer is closed (inner text empty): read its text content; header names are shown in lower case
    drawer = page.locator("#exchanges").text_content().lower()
    assert '"a2a-version": "1.0"' in drawer and "a2a-extensions" not in drawer


def test_hostile_html_from_an_agent_is_inert_text(page: Any, agent_url: Callable[[str], str], hold: threading.Event) -> None:
    from playwright.sync_api import expect

    # Given
    connect(page, agent_url(html_agent.agent.name))
    # When: an approval, then the reply, each carrying <script>, <img onerror> and terminal escapes
    send(page, "ask")
    expect(page.locator("form.interaction.approval")).to_contain_text(html_agent.IMAGE, timeout=30_000)
    page.locator("form.interaction.approval button", has_text="Approve").click()
    expect_state(page, "COMPLETED")
    # Then: the markup is shown as the words it is, and none of it ran or became an element
    main = page.locator("main")
    markup = f"{html_agent.SCRIPT} {html_agent.IMAGE}"
    for shown in (f"reply {markup}", f"cell {markup}", f"note {markup}", f"report {html_agent.IMAGE}"):
        expect(main).to_contain_text(shown)
    assert page.evaluate("window.pwned") is None
    assert page.locator("main img").count() == 0
    assert page.locator("main script").count() == 0
    assert "\x1b" not in page.locator("#task-body").inner_text()


def test_an_agents_error_is_shown_in_words(page: Any, agent_url: Callable[[str], str], hold: threading.Event) -> None:
    from playwright.sync_api import expect

    # Given: an approval on the page, whose live updates are cut, so it still shows the form after another window
    # answered it
    page.route("**/api/events", lambda route: route.abort())
    url = agent_url(html_agent.agent.name)
    connect(page, url)
    send(page, "ask")
    approval = page.locator("form.interaction.approval")
    expect(approval).to_be_visible(timeout=30_000)
    task_id = page.locator("#task-id").inner_text().split()[1]
    headers = auth(**{"A2A-Extensions": INTERACTIONS})
    task = rpc(url, "GetTask", {"id": task_id}, headers=headers)["result"]
    asked = task["status"]["message"]["metadata"][INTERACTIONS]["interactionId"]
    answer = {"interactionId": asked, "approved": True}
    elsewhere = user_message("ok", taskId=task_id, extensions=[INTERACTIONS], metadata={INTERACTIONS: answer})
    assert "result" in rpc(url, "SendMessage", {"message": elsewhere}, headers=headers)
    # When: the person clicks Approve on the stale form
    approval.locator("button", has_text="Approve").click()
    # Then: the Agent's refusal in words (its message, code and reason), beside the task still shown
    error = page.locator("#error")
    expect(error).to_be_visible()
    expect(error).to_contain_text(f"SendMessage: interactionId {asked} was already answered")
    expect(error).to_contain_text("[-32602] (INVALID_PARAMS)")
    expect(page.locator("#task-state")).to_have_text("AUTH_REQUIRED")


def test_a_page_whose_live_updates_fail_says_so_and_refreshes_the_task(page: Any, local_runtime: LocalRuntime) -> None:
    from playwright.sync_api import expect

    # Given: a page whose live updates (the console's event stream) cannot connect, and a task whose turn is held
    release = threading.Event()
    held_agent(local_runtime, "t-console-cut", release)
    page.route("**/api/events", lambda route: route.abort())
    connect(page, local_runtime.agent_url("t-console-cut"))
    send(page, "hold on")
    expect(page.locator("#task-state")).to_have_text("WORKING", timeout=30_000)
    # Then: the page says its live updates are unavailable and it refreshes instead
    expect(page.locator("#live-mode")).to_have_text("Live updates unavailable: refreshing every 2 s")
    # When: the turn goes on and ends, with no push reaching the page
    release.set()
    # Then: the page shows the task's end all the same
    expect_state(page, "COMPLETED")
    expect(page.locator(".status-text")).to_have_text("done")


def say_to(url: str, text: str, **fields: str) -> dict[str, Any]:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}], **fields}
    body = {"jsonrpc": "2.0", "id": "1", "method": "SendMessage", "params": {"message": message}}
    answer = httpx.post(url + "/", json=body, headers={"A2A-Version": "1.0"}, timeout=30).json()
    return dict(answer["result"]["task"])


def test_a_late_unfiltered_listing_does_not_replace_the_filtered_one_nor_its_next_page(page: Any) -> None:
    from playwright.sync_api import expect

    with core_served() as url:
        # Given: 11 tasks asking a question in one context, 3 in another, and connect's own (unfiltered) listing
        # held back until the person's filtered listing has answered
        for n in range(11):
            say_to(url, f"ask {n}", contextId="ctx-late")
        for n in range(3):
            say_to(url, f"other {n}", contextId="ctx-elsewhere")
        held: list[Any] = []

        def hold_unfiltered(route: Any) -> None:
            body = route.request.post_data_json or {}
            if body.get("method") == "ListTasks" and "contextId" not in body.get("params", {}) and not held:
                held.append(route)
            else:
                route.continue_()

        page.route("**/api/rpc", hold_unfiltered)
        connect(page, url + "/")
        page.fill("#filter-context", "ctx-late")
        page.click("#filters button[type=submit]")
        listed = page.locator("#task-list button")
        expect(listed).to_have_count(10)
        # When: connect's listing answers late, and the person asks for the next page
        answered = int(page.locator("#exchange-count").inner_text())
        held[0].continue_()
        expect(page.locator("#exchange-count")).not_to_have_text(str(answered))
        page.click("#next-page")
        # Then: the next page is ctx-late's: its one task left (not the whole list's four)
        expect(listed).to_have_count(1)
        expect(page.locator("#next-page")).to_be_hidden()


def test_the_task_list_filters_by_context_and_state_and_pages(page: Any) -> None:
    from playwright.sync_api import expect

    with core_served() as url:
        # Given: 12 tasks asking a question in one context (one of them answered since), 2 in another
        def say(text: str, **fields: str) -> dict[str, Any]:
            return say_to(url, text, **fields)

        many = [say(f"ask {n}", contextId="ctx-many") for n in range(12)]
        say("green", taskId=many[0]["id"], contextId="ctx-many")
        for n in range(2):
            say(f"other {n}", contextId="ctx-other")
        connect(page, url + "/")
        # When: the person lists ctx-many's tasks waiting for input
        page.fill("#filter-context", "ctx-many")
        page.select_option("#filter-state", "TASK_STATE_INPUT_REQUIRED")
        page.click("#filters button[type=submit]")
        # Then: ten on the first page, the one left on the next, every one waiting for input
        listed = page.locator("#task-list button")
        expect(listed).to_have_count(10)
        first = listed.all_inner_texts()
        page.click("#next-page")
        expect(listed).to_have_count(1)
        assert all(text.startswith("INPUT_REQUIRED") for text in first + listed.all_inner_texts())
        expect(page.locator("#next-page")).to_be_hidden()
        # When: the other context, any state
        page.fill("#filter-context", "ctx-other")
        page.select_option("#filter-state", "")
        page.click("#filters button[type=submit]")
        # Then: its two tasks only
        expect(listed).to_have_count(2)
        expect(page.locator("#next-page")).to_be_hidden()
