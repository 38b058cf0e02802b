"""End to end: the a2a-sdk 1.3.0 client, as any A2A 1.0 caller would use it, against the local Runtime.

Every call goes over real HTTP to the uvicorn server of the `local_runtime` fixture (moto for AWS; Step
Functions really runs the turn). The SDK client is async and pytest-asyncio is not installed, so each test
is a plain function that runs its async body with `asyncio.run`. Only the checks the SDK cannot make (a
missing or wrong `A2A-Version`, a repeated `A2A-Extensions` header) use raw httpx.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from a2a.client import Client, ClientCallContext, ClientConfig, create_client
from a2a.types import (
    AuthenticationInfo,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import (
    JSON_RPC_ERROR_CODE_MAP,
    A2AError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from conftest import ALICE, BOB, auth, rpc, user_message
from google.protobuf import json_format
from google.protobuf.timestamp_pb2 import Timestamp
from nylorun_local.runtime import LocalRuntime

pytestmark = pytest.mark.e2e

NYLORUN_EXTENSIONS = [
    f"https://docs.nylorun.com/a2a/{name}/v1"
    for name in ("interactions", "effects", "progress", "telemetry", "files")
]
TELEMETRY = "https://docs.nylorun.com/a2a/telemetry/v1"
PROGRESS = "https://docs.nylorun.com/a2a/progress/v1"

COMPLETED = "TASK_STATE_COMPLETED"
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"


# ---------------------------------------------------------------------------------------------- helpers
@pytest.fixture()
def tck_url(local_runtime: LocalRuntime) -> str:
    return local_runtime.agent_url("tck")


@pytest.fixture()
def echo_url(local_runtime: LocalRuntime) -> str:
    return local_runtime.agent_url("echo")


@asynccontextmanager
async def connect(
    url: str,
    token: str = ALICE,
    *,
    polling: bool = False,
    streaming: bool = False,
    on_response: Callable[[httpx.Response], Any] | None = None,
) -> AsyncIterator[Client]:
    """An SDK client for the Agent at `url`: it resolves the card, then POSTs to the card's interface."""

    async def record(response: httpx.Response) -> None:
        if on_response is not None:
            on_response(response)

    hooks: dict[str, list[Callable[..., Any]]] = {"response": [record]}
    async with httpx.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=60, event_hooks=hooks
    ) as http:
        client = await create_client(
            url, client_config=ClientConfig(streaming=streaming, polling=polling, httpx_client=http)
        )
        try:
            yield client
        finally:
            await client.close()


def user_msg(
    text: str = "hello",
    *,
    scenario: str = "m",
    message_id: str | None = None,
    task_id: str = "",
    context_id: str = "",
) -> Message:
    """A user message; the tck Agent picks its scenario from the messageId prefix."""
    return Message(
        message_id=message_id or f"{scenario}-{uuid.uuid4()}",
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )


async def send(
    client: Client,
    message: Message,
    configuration: SendMessageConfiguration | None = None,
    context: ClientCallContext | None = None,
) -> StreamResponse:
    request = SendMessageRequest(message=message)
    if configuration is not None:
        request.configuration.CopyFrom(configuration)
    responses = [r async for r in client.send_message(request, context=context)]
    assert len(responses) == 1, responses  # SendMessage (not streaming): one answer
    return responses[0]


async def send_task(client: Client, message: Message, **kwargs: Any) -> Task:
    response = await send(client, message, **kwargs)
    assert response.HasField("task"), f"expected a task, got {response}"
    return response.task


def state(task: Task) -> str:
    return TaskState.Name(task.status.state)


def text(message: Message) -> str:
    return "".join(part.text for part in message.parts)


async def wait_for(client: Client, task_id: str, wanted: str, timeout: float = 20.0) -> Task:
    """Poll GetTask until the task is in `wanted` (bounded; returns the last task seen either way)."""
    deadline = time.monotonic() + timeout
    while True:
        task = await client.get_task(GetTaskRequest(id=task_id))
        if state(task) == wanted or time.monotonic() > deadline:
            return task
        await asyncio.sleep(0.1)


def code_of(error: A2AError) -> int:
    return JSON_RPC_ERROR_CODE_MAP[type(error)]


def extensions_echoed(response: httpx.Response) -> list[str]:
    """The URIs in the response's A2A-Extensions header (comma-separated, trimmed; absent = none)."""
    return [uri.strip() for uri in response.headers.get("A2A-Extensions", "").split(",") if uri.strip()]


# ---------------------------------------------------------------------------------------------- 1. card
def test_client_resolves_the_card_profile_v2_declares(tck_url: str) -> None:
    async def body() -> None:
        # Given an SDK client made from nothing but the Agent's URL
        async with connect(tck_url) as client:
            # When it hands back the card it resolved (extendedAgentCard is false: no extra request)
            card = await client.get_extended_agent_card(GetExtendedAgentCardRequest())

        # Then the card is the tck Agent's, with exactly one JSON-RPC 1.0 interface at the Agent URL
        assert card.name == "tck"
        assert [(i.protocol_binding, i.protocol_version, i.url) for i in card.supported_interfaces] == [
            # the Agent URL ends with "/" (docs/decisions/0012-agent-urls-trailing-slash.md)
            ("JSONRPC", "1.0", tck_url + "/")
        ]
        # And streaming is declared false (sent, not just omitted), push notifications true
        capabilities = card.capabilities
        assert capabilities.HasField("streaming") and capabilities.streaming is False
        assert capabilities.push_notifications is True
        assert capabilities.extended_agent_card is False
        # And the five Nylorun extensions are declared, none required
        assert {e.uri: e.required for e in capabilities.extensions} == dict.fromkeys(
            NYLORUN_EXTENSIONS, False
        )
        assert len(capabilities.extensions) == 5

    asyncio.run(body())


# ---------------------------------------------------------------------------------------------- 2. SendMessage
@pytest.mark.parametrize("streaming", [False, True], ids=["client-non-streaming", "client-default-streaming"])
def test_blocking_send_message_answers_with_the_completed_task(echo_url: str, streaming: bool) -> None:
    async def body() -> None:
        # Given a client that prefers streaming or not (the card says streaming: false, so the SDK must
        # use SendMessage either way), and a message to the echo Agent
        async with connect(echo_url, streaming=streaming) as client:
            message = user_msg("hello from the SDK")
            # When it is sent without returnImmediately (the SDK's default: blocking)
            task = await send_task(client, message)

        # Then the answer is the finished task, carrying the Agent's reply
        assert state(task) == COMPLETED
        assert task.id and task.context_id
        assert text(task.status.message) == "hello from the SDK"
        assert task.status.message.role == Role.ROLE_AGENT
        assert task.history[0].message_id == message.message_id

    asyncio.run(body())


@pytest.mark.parametrize("how", ["client-polling", "return-immediately"])
def test_return_immediately_answers_before_the_task_completes(echo_url: str, how: str) -> None:
    async def body() -> None:
        # Given a client asking not to wait (ClientConfig.polling, or returnImmediately in the request)
        polling = how == "client-polling"
        configuration = None if polling else SendMessageConfiguration(return_immediately=True)
        async with connect(echo_url, polling=polling) as client:
            # When it sends a message
            task = await send_task(client, user_msg("later"), configuration=configuration)

            # Then the task comes back at once, not finished yet
            assert state(task) in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
            # And polling GetTask later shows it completed, with the reply
            done = await wait_for(client, task.id, COMPLETED)
        assert state(done) == COMPLETED
        assert done.id == task.id
        assert text(done.status.message) == "later"

    asyncio.run(body())


# ---------------------------------------------------------------------------------------------- 3. tck
def test_tck_complete_task(tck_url: str) -> None:
    async def body() -> None:
        async with connect(tck_url) as client:
            # When the complete-task scenario runs
            task = await send_task(client, user_msg(scenario="tck-complete-task"))
        # Then the task is completed with the TCK greeting
        assert state(task) == COMPLETED
        assert text(task.status.message) == "Hello from TCK"

    asyncio.run(body())


@pytest.mark.parametrize("with_context", [True, False], ids=["taskId+contextId", "taskId-only"])
def test_tck_input_required_then_continuation_completes_the_same_task(
    tck_url: str, with_context: bool
) -> None:
    async def body() -> None:
        async with connect(tck_url) as client:
            # Given a task that asks for more input
            first = await send_task(client, user_msg(scenario="tck-input-required"))
            assert state(first) == INPUT_REQUIRED
            assert text(first.status.message) == "Please provide more input."

            # When the caller answers with the task id (with or without its context id) and some text
            context_id = first.context_id if with_context else ""
            answer = user_msg("forty-two", task_id=first.id, context_id=context_id)
            second = await send_task(client, answer)

        # Then the same task completes with the answer in its reply
        assert second.id == first.id
        assert second.context_id == first.context_id
        assert state(second) == COMPLETED
        assert text(second.status.message) == "Input received: forty-two"

    asyncio.run(body())


def test_tck_follow_ups_play_their_own_scenario(tck_url: str) -> None:
    # Given: a task waiting for input (the TCK's multi-turn history setup)
    run_id = uuid.uuid4()
    first = rpc(tck_url, "SendMessage", {"message": user_message("start", f"tck-input-required-{run_id}")})
    task_id = first["result"]["task"]["id"]
    states = []
    # When: two follow-ups whose messageIds say "input-required" (the same id, other text), then one that
    # says "complete-task"
    for text_ in ("TCK history message 1", "TCK history message 2"):
        follow_up = user_message(text_, f"tck-input-required-{run_id}", taskId=task_id)
        states.append(rpc(tck_url, "SendMessage", {"message": follow_up})["result"]["task"]["status"]["state"])
    done = rpc(
        tck_url,
        "SendMessage",
        {"message": user_message("finish", f"tck-complete-task-{run_id}", taskId=task_id)},
    )["result"]["task"]
    # Then: the task asks again after each "input-required" follow-up, and completes after the last one,
    # with every message in its history in the order sent
    assert states == [INPUT_REQUIRED, INPUT_REQUIRED]
    assert done["id"] == task_id and done["status"]["state"] == COMPLETED
    assert done["status"]["message"]["parts"][0]["text"] == "Hello from TCK"
    sent = [m["parts"][0]["text"] for m in done["history"] if m["role"] == "ROLE_USER"]
    assert sent == ["start", "TCK history message 1", "TCK history message 2", "finish"]


def test_tck_message_response_is_a_message_without_task(tck_url: str) -> None:
    async def body() -> None:
        async with connect(tck_url) as client:
            # When the message-response scenario runs
            response = await send(client, user_msg(scenario="tck-message-response"))
        # Then the answer is a direct agent Message, and no task was made
        assert response.HasField("message") and not response.HasField("task")
        assert response.message.role == Role.ROLE_AGENT
        assert text(response.message) == "Direct message response"
        assert response.message.task_id == ""

    asyncio.run(body())


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        ("tck-artifact-text", {"text": "Generated text content"}),
        ("tck-artifact-file", {"raw": b"tck", "media_type": "text/plain", "filename": "output.txt"}),
        (
            "tck-artifact-file-url",
            {"url": "https://example.com/output.txt", "media_type": "text/plain", "filename": "output.txt"},
        ),
        ("tck-artifact-data", {"data": {"key": "value", "count": 42}, "media_type": "application/json"}),
    ],
)
def test_tck_artifacts_arrive_with_their_content(
    tck_url: str, scenario: str, expected: dict[str, Any]
) -> None:
    async def body() -> None:
        async with connect(tck_url) as client:
            # When an artifact scenario runs
            task = await send_task(client, user_msg(scenario=scenario))
        # Then the completed task carries one artifact whose single part has exactly that content
        assert state(task) == COMPLETED
        assert len(task.artifacts) == 1
        artifact = task.artifacts[0]
        assert artifact.artifact_id
        assert len(artifact.parts) == 1
        part = artifact.parts[0]
        assert part.WhichOneof("content") == next(iter(expected))
        seen = {
            "text": part.text,
            "raw": part.raw,
            "url": part.url,
            "data": json_format.MessageToDict(part.data) if part.HasField("data") else None,
            "media_type": part.media_type,
            "filename": part.filename,
        }
        assert {key: seen[key] for key in expected} == expected
        # And nothing else is set on the part
        assert {k for k, v in seen.items() if v} == set(expected)

    asyncio.run(body())


def test_tck_reject_task(tck_url: str) -> None:
    async def body() -> None:
        async with connect(tck_url) as client:
            # When the reject-task scenario runs
            task = await send_task(client, user_msg(scenario="tck-reject-task"))
            # Then the task is rejected, and stays so
            again = await client.get_task(GetTaskRequest(id=task.id))
        assert state(task) == "TASK_STATE_REJECTED"
        assert text(task.status.message) == "Task rejected"
        assert state(again) == "TASK_STATE_REJECTED"

    asyncio.run(body())


# ---------------------------------------------------------------------------------------------- 4. GetTask
def test_get_task_history_length(tck_url: str) -> None:
    async def body() -> None:
        async with connect(tck_url) as client:
            # Given a completed task: the user's message, then the agent's reply
            message = user_msg("hi", scenario="tck-complete-task")
            task = await send_task(client, message)
            assert state(task) == COMPLETED

            # When it is read with no historyLength, 0, and 1
            full = await client.get_task(GetTaskRequest(id=task.id))
            none = await client.get_task(GetTaskRequest(id=task.id, history_length=0))
            last = await client.get_task(GetTaskRequest(id=task.id, history_length=1))

        # Then unset is the whole history, in order
        assert [(m.role, text(m)) for m in full.history] == [
            (Role.ROLE_USER, "hi"),
            (Role.ROLE_AGENT, "Hello from TCK"),
        ]
        assert full.history[0].message_id == message.message_id
        # And 0 is no history at all (the task itself is still there)
        assert len(none.history) == 0
        assert none.id == task.id and state(none) == COMPLETED
        # And 1 is only the most recent message
        assert [(m.role, text(m)) for m in last.history] == [(Role.ROLE_AGENT, "Hello from TCK")]
        assert last.history[0].message_id == full.history[-1].message_id

    asyncio.run(body())


# ---------------------------------------------------------------------------------------------- 5. ListTasks
@dataclass(frozen=True)
class Listed:
    """Three tasks of alice in a fresh context, oldest first: an artifact, a completed one, one waiting."""

    context_id: str
    tasks: list[Task]

    @property
    def ids(self) -> list[str]:
        return [t.id for t in self.tasks]


@pytest.fixture(scope="module")
def listed(local_runtime: LocalRuntime) -> Iterator[Listed]:
    url = local_runtime.agent_url("tck")
    context_id = f"ctx-list-{uuid.uuid4()}"

    async def create() -> list[Task]:
        async with connect(url) as client:
            # The waiting one last: a context holds one unfinished task at a time.
            return [
                await send_task(client, user_msg(scenario=scenario, context_id=context_id))
                for scenario in ("tck-artifact-text", "tck-complete-task", "tck-input-required")
            ]

    tasks = asyncio.run(create())
    assert [state(t) for t in tasks] == [COMPLETED, COMPLETED, INPUT_REQUIRED]
    assert {t.context_id for t in tasks} == {context_id}
    yield Listed(context_id=context_id, tasks=tasks)

    async def cancel_waiting() -> None:
        async with connect(url) as client:
            await client.cancel_task(CancelTaskRequest(id=tasks[2].id))

    asyncio.run(cancel_waiting())


async def list_tasks(request: ListTasksRequest, url: str, token: str = ALICE) -> ListTasksResponse:
    async with connect(url, token) as client:
        return await client.list_tasks(request)


def test_list_tasks_filters_by_context_newest_status_first(tck_url: str, listed: Listed) -> None:
    # When alice lists the tasks of the context
    page = asyncio.run(list_tasks(ListTasksRequest(context_id=listed.context_id), tck_url))
    # Then she gets exactly its three tasks, most recently updated first
    assert [t.id for t in page.tasks] == listed.ids[::-1]
    assert page.total_size == 3
    assert page.next_page_token == ""
    stamps = [t.status.timestamp.ToDatetime() for t in page.tasks]
    assert stamps == sorted(stamps, reverse=True)
    assert all(t.context_id == listed.context_id for t in page.tasks)


def test_list_tasks_filters_by_status(tck_url: str, listed: Listed) -> None:
    # When alice lists the context's completed tasks, then its waiting ones
    completed = asyncio.run(
        list_tasks(
            ListTasksRequest(context_id=listed.context_id, status=TaskState.TASK_STATE_COMPLETED), tck_url
        )
    )
    waiting = asyncio.run(
        list_tasks(
            ListTasksRequest(context_id=listed.context_id, status=TaskState.TASK_STATE_INPUT_REQUIRED),
            tck_url,
        )
    )
    # Then each list holds only tasks in that state
    assert [t.id for t in completed.tasks] == [listed.ids[1], listed.ids[0]]
    assert completed.total_size == 2
    assert [t.id for t in waiting.tasks] == [listed.ids[2]]
    assert waiting.total_size == 1
    assert [state(t) for t in waiting.tasks] == [INPUT_REQUIRED]


@pytest.mark.parametrize("status", ["TASK_STATE_UNSPECIFIED", "UNRECOGNIZED"])
def test_list_tasks_reads_an_unset_status_as_no_filter(tck_url: str, listed: Listed, status: str) -> None:
    # When: the proto3 zero value, and what @a2a-js/sdk 1.3.0 sends for a status it did not set
    answer = rpc(tck_url, "ListTasks", {"contextId": listed.context_id, "status": status})
    # Then: every task of the context, as with no status at all
    assert [t["id"] for t in answer["result"]["tasks"]] == listed.ids[::-1], answer


def test_list_tasks_pages_through_all_with_next_page_token(tck_url: str, listed: Listed) -> None:
    async def body() -> tuple[ListTasksResponse, ListTasksResponse]:
        async with connect(tck_url) as client:
            # When alice lists the context two at a time
            first = await client.list_tasks(ListTasksRequest(context_id=listed.context_id, page_size=2))
            second = await client.list_tasks(
                ListTasksRequest(context_id=listed.context_id, page_size=2, page_token=first.next_page_token)
            )
        return first, second

    first, second = asyncio.run(body())
    # Then the first page has two tasks and a token to go on
    assert [t.id for t in first.tasks] == listed.ids[:0:-1]
    assert first.next_page_token != ""
    assert (first.page_size, first.total_size) == (2, 3)
    # And the second page has the last one, and an empty token: the end
    assert [t.id for t in second.tasks] == [listed.ids[0]]
    assert second.next_page_token == ""
    assert (second.page_size, second.total_size) == (2, 3)


def test_list_tasks_status_timestamp_after(tck_url: str, listed: Listed) -> None:
    # Given the status timestamp of the middle task, and one just after the newest
    middle = listed.tasks[1].status.timestamp
    after_all = Timestamp()
    after_all.FromMilliseconds(listed.tasks[2].status.timestamp.ToMilliseconds() + 1)
    # When alice lists the context's tasks updated at or after each
    since_middle = asyncio.run(
        list_tasks(ListTasksRequest(context_id=listed.context_id, status_timestamp_after=middle), tck_url)
    )
    since_end = asyncio.run(
        list_tasks(ListTasksRequest(context_id=listed.context_id, status_timestamp_after=after_all), tck_url)
    )
    # Then the first holds the middle task and the newer one (>= keeps the boundary), the second nothing
    assert [t.id for t in since_middle.tasks] == [listed.ids[2], listed.ids[1]]
    assert since_middle.total_size == 2
    assert list(since_end.tasks) == []
    assert since_end.total_size == 0
    assert since_end.next_page_token == ""


def test_list_tasks_include_artifacts(tck_url: str, listed: Listed) -> None:
    # When alice lists the context without artifacts (default, and asked explicitly), then with them
    default = asyncio.run(list_tasks(ListTasksRequest(context_id=listed.context_id), tck_url))
    without = asyncio.run(
        list_tasks(ListTasksRequest(context_id=listed.context_id, include_artifacts=False), tck_url)
    )
    with_artifacts = asyncio.run(
        list_tasks(ListTasksRequest(context_id=listed.context_id, include_artifacts=True), tck_url)
    )
    # Then without them no task carries artifacts, and the wire omits the field (not [])
    for page in (default, without):
        assert [len(t.artifacts) for t in page.tasks] == [0, 0, 0]
    raw = rpc(tck_url, "ListTasks", {"contextId": listed.context_id, "includeArtifacts": False})
    assert [("artifacts" in t) for t in raw["result"]["tasks"]] == [False, False, False]
    # And with them the artifact task has its text artifact
    by_id = {t.id: t for t in with_artifacts.tasks}
    assert [p.text for p in by_id[listed.ids[0]].artifacts[0].parts] == ["Generated text content"]
    assert len(by_id[listed.ids[1]].artifacts) == 0


def test_list_tasks_shows_only_the_callers_tasks(tck_url: str, listed: Listed) -> None:
    # When bob lists alice's context
    page = asyncio.run(list_tasks(ListTasksRequest(context_id=listed.context_id), tck_url, BOB))
    # Then he sees nothing of it
    assert list(page.tasks) == []
    assert page.total_size == 0


# ---------------------------------------------------------------------------------------------- 6. CancelTask
def test_cancel_a_waiting_task_then_again(tck_url: str) -> None:
    async def body() -> None:
        async with connect(tck_url) as client:
            # Given a task waiting for input
            task = await send_task(client, user_msg(scenario="tck-input-required"))
            assert state(task) == INPUT_REQUIRED

            # When alice cancels it
            canceled = await client.cancel_task(CancelTaskRequest(id=task.id))
            # Then it is canceled, and GetTask agrees
            assert canceled.id == task.id
            assert state(canceled) == "TASK_STATE_CANCELED"
            assert state(await client.get_task(GetTaskRequest(id=task.id))) == "TASK_STATE_CANCELED"

            # When she cancels it again
            with pytest.raises(TaskNotCancelableError) as again:
                await client.cancel_task(CancelTaskRequest(id=task.id))
        # Then the task cannot be canceled (-32002)
        assert code_of(again.value) == -32002

    asyncio.run(body())


def test_cancel_a_completed_task_is_not_cancelable(tck_url: str) -> None:
    async def body() -> None:
        async with connect(tck_url) as client:
            # Given a completed task
            task = await send_task(client, user_msg(scenario="tck-complete-task"))
            assert state(task) == COMPLETED
            # When alice cancels it
            with pytest.raises(TaskNotCancelableError) as caught:
                await client.cancel_task(CancelTaskRequest(id=task.id))
            # Then -32002, and the task is still completed
            assert code_of(caught.value) == -32002
            assert state(await client.get_task(GetTaskRequest(id=task.id))) == COMPLETED

    asyncio.run(body())


# ---------------------------------------------------------------------------------------------- 7. push configs
def test_push_config_create_get_list_delete(tck_url: str) -> None:
    hook = "http://127.0.0.1:9/hook"

    async def body() -> None:
        async with connect(tck_url) as client:
            # Given a task that is still open
            task = await send_task(client, user_msg(scenario="tck-input-required"))
            assert state(task) == INPUT_REQUIRED

            # When alice adds a push config with Bearer credentials
            created = await client.create_task_push_notification_config(
                TaskPushNotificationConfig(
                    task_id=task.id,
                    url=hook,
                    token="per-task-token",
                    authentication=AuthenticationInfo(scheme="Bearer", credentials="sekret"),
                )
            )
            # Then it has an id, and the secrets are not sent back
            assert created.id
            assert (created.task_id, created.url, created.authentication.scheme) == (task.id, hook, "Bearer")
            assert created.authentication.credentials == ""
            assert created.token == ""

            # When she reads it, and lists the task's configs
            got = await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task.id, id=created.id)
            )
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id)
            )
            # Then both show the config, never its credentials or token
            assert (got.id, got.task_id, got.url, got.authentication.scheme) == (
                created.id,
                task.id,
                hook,
                "Bearer",
            )
            assert (got.authentication.credentials, got.token) == ("", "")
            assert [(c.id, c.url) for c in listed.configs] == [(created.id, hook)]
            assert all(c.authentication.credentials == "" and c.token == "" for c in listed.configs)
            assert "sekret" not in str(listed) + str(got)

            # When she deletes it twice
            delete = DeleteTaskPushNotificationConfigRequest(task_id=task.id, id=created.id)
            await client.delete_task_push_notification_config(delete)
            await client.delete_task_push_notification_config(delete)  # idempotent: no error
            # Then it is gone: Get is not found, List is empty
            with pytest.raises(TaskNotFoundError) as gone:
                await client.get_task_push_notification_config(
                    GetTaskPushNotificationConfigRequest(task_id=task.id, id=created.id)
                )
            assert code_of(gone.value) == -32001
            after = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id)
            )
            assert list(after.configs) == []

            await client.cancel_task(CancelTaskRequest(id=task.id))  # tidy up the open task

    asyncio.run(body())


# ---------------------------------------------------------------------------------------------- 8. errors
def test_unknown_task_is_task_not_found(tck_url: str) -> None:
    async def body() -> None:
        async with connect(tck_url) as client:
            # When alice reads a task id that does not exist
            with pytest.raises(TaskNotFoundError) as caught:
                await client.get_task(GetTaskRequest(id=f"no-such-task-{uuid.uuid4()}"))
        # Then it is TaskNotFoundError, -32001
        assert code_of(caught.value) == -32001

    asyncio.run(body())


def test_another_subjects_task_is_not_found(tck_url: str) -> None:
    async def body() -> None:
        # Given a task of alice's, waiting for input
        async with connect(tck_url, ALICE) as alice:
            task = await send_task(alice, user_msg(scenario="tck-input-required"))
            assert state(task) == INPUT_REQUIRED
            try:
                async with connect(tck_url, BOB) as bob:
                    # When bob reads it, cancels it, or answers it
                    with pytest.raises(TaskNotFoundError) as read:
                        await bob.get_task(GetTaskRequest(id=task.id))
                    with pytest.raises(TaskNotFoundError) as cancel:
                        await bob.cancel_task(CancelTaskRequest(id=task.id))
                    with pytest.raises(TaskNotFoundError) as answer:
                        await send(bob, user_msg("mine now", task_id=task.id))
                # Then each time it is "not found" (-32001), never "forbidden"
                assert [code_of(e.value) for e in (read, cancel, answer)] == [-32001] * 3
                # And alice's task is untouched
                assert state(await alice.get_task(GetTaskRequest(id=task.id))) == INPUT_REQUIRED
            finally:
                await alice.cancel_task(CancelTaskRequest(id=task.id))

    asyncio.run(body())


def test_message_to_a_completed_task_is_unsupported(tck_url: str) -> None:
    async def body() -> None:
        async with connect(tck_url) as client:
            # Given a completed task
            task = await send_task(client, user_msg(scenario="tck-complete-task"))
            assert state(task) == COMPLETED
            # When alice sends another message to it
            with pytest.raises(UnsupportedOperationError) as caught:
                await send(client, user_msg("more", task_id=task.id, context_id=task.context_id))
            # Then it is UnsupportedOperationError (-32004): terminal tasks are immutable
            assert code_of(caught.value) == -32004
            after = await client.get_task(GetTaskRequest(id=task.id))
        assert state(after) == COMPLETED
        assert len(after.history) == len(task.history)

    asyncio.run(body())


def test_repeated_message_id_returns_the_same_task(echo_url: str) -> None:
    async def body() -> None:
        context_id = f"ctx-dup-{uuid.uuid4()}"
        async with connect(echo_url) as client:
            # Given a message already sent once
            message = user_msg("only once", context_id=context_id)
            first = await send_task(client, message)
            # When the very same message (same messageId) is sent again
            second = await send_task(client, message)
            # Then the answer is the same task, and the context holds just that one task
            listed = await client.list_tasks(ListTasksRequest(context_id=context_id))
        assert second.id == first.id
        assert state(second) == COMPLETED
        assert [t.id for t in listed.tasks] == [first.id]
        assert [text(m) for m in second.history] == ["only once", "only once"]

    asyncio.run(body())


def test_the_same_message_id_with_other_content_is_another_message(echo_url: str) -> None:
    context_id = f"ctx-reuse-{uuid.uuid4()}"
    message_id = f"reused-{uuid.uuid4()}"
    # Given: a task made by a message
    first = rpc(echo_url, "SendMessage", {"message": user_message("first", message_id, contextId=context_id)})
    # When: the caller reuses its messageId for a message that says something else, and for one that only
    # adds metadata, then retries the second exactly
    other = rpc(echo_url, "SendMessage", {"message": user_message("second", message_id, contextId=context_id)})
    tagged = {"message": user_message("second", message_id, contextId=context_id, metadata={"k": "v"})}
    third = rpc(echo_url, "SendMessage", tagged)
    retried = rpc(echo_url, "SendMessage", tagged)
    # Then: each different message got its own task, in order, with its own text; the exact retry got its task
    ids = [a["result"]["task"]["id"] for a in (first, other, third)]
    assert len(set(ids)) == 3
    assert retried["result"]["task"]["id"] == ids[2]
    assert other["result"]["task"]["status"]["message"]["parts"][0]["text"] == "second"
    listed = rpc(echo_url, "ListTasks", {"contextId": context_id})["result"]
    assert listed["totalSize"] == 3


@pytest.mark.parametrize("action", ["follow-up", "cancel"])
def test_the_same_message_after_the_caller_acted_on_its_task_is_a_new_message(tck_url: str, action: str) -> None:
    # Given: a task waiting for input, made by a message; the caller acts on it (the TCK's setup, reused)
    message = user_message("TCK prerequisite task creation", f"tck-input-required-{uuid.uuid4()}")
    first = rpc(tck_url, "SendMessage", {"message": message})["result"]["task"]
    assert rpc(tck_url, "SendMessage", {"message": message})["result"]["task"]["id"] == first["id"]  # a retry
    if action == "follow-up":
        follow_up = user_message("done", f"tck-complete-task-{uuid.uuid4()}", taskId=first["id"])
        assert rpc(tck_url, "SendMessage", {"message": follow_up})["result"]["task"]["status"]["state"] == COMPLETED
    else:
        rpc(tck_url, "CancelTask", {"id": first["id"]})
    # When: the very same message is sent again
    again = rpc(tck_url, "SendMessage", {"message": message})["result"]["task"]
    # Then: it made a new task that waits for input, and sending it once more is a retry of that one
    assert again["id"] != first["id"]
    assert again["status"]["state"] == INPUT_REQUIRED
    assert rpc(tck_url, "SendMessage", {"message": message})["result"]["task"]["id"] == again["id"]


# ---------------------------------------------------------------------------------------------- 9. version
@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": f"Bearer {ALICE}"},  # no A2A-Version: read as 0.3
        {"Authorization": f"Bearer {ALICE}", "A2A-Version": "0.3"},
        {"Authorization": f"Bearer {ALICE}", "A2A-Version": "2.0"},
    ],
    ids=["missing", "0.3", "2.0"],
)
def test_unsupported_version_is_error_32009(tck_url: str, headers: dict[str, str]) -> None:
    # When a caller sends a valid request without A2A 1.0 (the SDK always sends 1.0, so raw HTTP here)
    answer = rpc(tck_url, "SendMessage", {"message": user_message("hi")}, headers=headers)
    # Then it is VersionNotSupportedError, and nothing ran
    assert answer["error"]["code"] == -32009, answer
    assert "1.0" in answer["error"]["message"]
    assert "result" not in answer


def test_version_query_parameter_is_accepted_without_header(tck_url: str) -> None:
    # When a caller without the header puts ?A2A-Version=1.0 on the URL
    headers = {"Authorization": f"Bearer {ALICE}"}
    answer = rpc(
        tck_url + "?A2A-Version=1.0", "SendMessage", {"message": user_message("hi")}, headers=headers
    )
    # Then the request is served
    assert "error" not in answer, answer
    assert answer["result"]["task"]["status"]["state"] == COMPLETED
    # And GetTask the same way finds the task
    task_id = answer["result"]["task"]["id"]
    got = rpc(tck_url + "?A2A-Version=1.0", "GetTask", {"id": task_id}, headers=headers)
    assert got["result"]["id"] == task_id


# ---------------------------------------------------------------------------------------------- 10. extensions
def test_activated_extensions_are_echoed_through_the_client(tck_url: str) -> None:
    seen: list[httpx.Response] = []

    async def body() -> tuple[Task, Task]:
        async with connect(tck_url, on_response=seen.append) as client:
            # Given a caller that activates telemetry and progress, plus one URI the Agent does not declare
            requested = f"{TELEMETRY}, https://example.com/ext/unknown/v1 ,{PROGRESS}"
            context = ClientCallContext(service_parameters={"A2A-Extensions": requested})
            # When it sends a message with them, and then one without
            seen.clear()
            with_ext = await send_task(client, user_msg(scenario="tck-complete-task"), context=context)
            with_response = seen[-1]
            without = await send_task(client, user_msg(scenario="tck-complete-task"))
            without_response = seen[-1]
        # Then the response names exactly the declared extensions it activated, unknown ones dropped
        assert sorted(extensions_echoed(with_response)) == sorted([TELEMETRY, PROGRESS])
        # And without the header nothing is activated or echoed
        assert extensions_echoed(without_response) == []
        return with_ext, without

    with_ext, without = asyncio.run(body())
    # And what the caller sees follows: telemetry data only on the task read with telemetry activated
    assert TELEMETRY in with_ext.status.message.metadata
    assert TELEMETRY not in without.status.message.metadata


def test_repeated_extensions_header_with_whitespace(tck_url: str) -> None:
    # Given the A2A-Extensions header twice, with spaces and tabs, a duplicate, an empty item and an unknown URI
    headers = [
        *auth().items(),
        ("A2A-Extensions", f"{NYLORUN_EXTENSIONS[0]}  ,https://example.com/nope/v1"),
        ("A2A-Extensions", f"{NYLORUN_EXTENSIONS[4]},\t {NYLORUN_EXTENSIONS[0]} ,,"),
    ]
    body = {"jsonrpc": "2.0", "id": "1", "method": "ListTasks", "params": {"pageSize": 1}}
    # When a raw request carries them
    response = httpx.post(tck_url, json=body, headers=headers, timeout=60)
    # Then the response echoes the two declared ones, once each, and nothing else
    assert response.status_code == 200
    assert "error" not in response.json(), response.json()
    echoed = extensions_echoed(response)
    assert sorted(echoed) == sorted([NYLORUN_EXTENSIONS[0], NYLORUN_EXTENSIONS[4]])
    assert len(echoed) == len(set(echoed))
