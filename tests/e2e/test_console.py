"""The console in a real headless Chromium: a person works with Agents by clicking, against the local Runtime (push
mode), a core-tier a2a-sdk reference server (polling), and an Agent whose words are hostile HTML. Every request the
page makes goes to the console's own origin (checked after each test)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import html_agent
import pytest
from chromium import browser, served
from conftest import ALICE, held_agent
from core_agent import QUESTION, core_app
from nylorun_client.console import console_app
from nylorun_local.runtime import LocalRuntime

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


@pytest.fixture(scope="module")
def core_url() -> Iterator[str]:
    holder: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:  # the card names its own URL, known once served
        await holder["app"](scope, receive, send)

    with served(app) as url:
        holder["app"] = core_app(url + "/")
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


def test_support_walk_by_clicking_question_connection_text_yes_then_approve(
    page: Any, agent_url: Callable[[str], str]
) -> None:
    from playwright.sync_api import expect

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
    # Then: the connection is asked for, with a Connect button (no authorization URL: the button confirms)
    connection = page.locator("form.interaction.connection")
    expect(connection).to_contain_text("Connect your payments account", timeout=30_000)
    connection.locator("button", has_text="Connect").click()
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
    # Then
    expect_state(page, "COMPLETED")
    table = page.locator("figure.component.table table")
    expect(table.locator("th").first).to_have_text("Order")
    expect(table).to_contain_text("A-1001")


def test_refunds_shows_the_delegated_interactions_as_its_own(page: Any, agent_url: Callable[[str], str]) -> None:
    from playwright.sync_api import expect

    # Given
    connect(page, agent_url("refunds"))
    # When
    send(page, "Refund order A-1002")
    page.locator("form.interaction.connection button", has_text="Connect").click(timeout=60_000)
    approval = page.locator("form.interaction.approval")
    expect(approval).to_contain_text("A-1002", timeout=60_000)
    approval.locator("button", has_text="Deny").click()
    # Then
    expect(page.locator("#task-state")).not_to_have_text("AUTH_REQUIRED", timeout=60_000)
    expect(page.locator(".status-text")).not_to_contain_text("support")


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
    expect(page.locator("#task-id")).to_have_text(task_id)
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
    assert page.locator("form.interaction").count() == 0
    send(page, "blue")
    expect_state(page, "COMPLETED")
    expect(page.locator(".status-text")).to_have_text("You like blue.")
    assert "A2A-Extensions" not in page.locator("#exchanges").inner_text()


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
