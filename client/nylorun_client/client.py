"""`NylorunClient`: one caller talking to one A2A 1.0 Agent, on top of the a2a-sdk client.

The a2a-sdk does the transport (card resolution, JSON-RPC, `A2A-Version`, error mapping); this class adds
what Nylorun Profile v2 carries: it activates the profile's extensions with `A2A-Extensions` on every
call, reads their data into typed views (`TaskView`), and sends typed answers to interactions.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Collection, Sequence
from types import TracebackType
from typing import Any, Self

import httpx
from a2a.client import A2ACardResolver, Client, ClientCallContext, ClientConfig, create_client
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from nylorun.profile.extensions import EFFECTS, FILES, INTERACTIONS, PROGRESS, TELEMETRY, Interaction

from nylorun_client.views import MessageView, TaskView, message_view, task_view

CARD_PATH = "/.well-known/agent-card.json"  # the card's well-known path under the Agent's URL (a2a-1.0.md §6)
PROFILE_V2: tuple[str, ...] = (INTERACTIONS, EFFECTS, PROGRESS, TELEMETRY, FILES)
# A blocking SendMessage may wait up to the Runtime's a2aWaitMs (5 minutes by default) before it answers.
DEFAULT_TIMEOUT = httpx.Timeout(330.0, connect=10.0)


class ClientError(Exception):
    """A request this client will not send, with the reason in words a person can act on."""


class NoOpenInteraction(ClientError):
    """The task waits for nothing that can be answered the typed way."""


class NylorunClient:
    """Use as `async with NylorunClient(url, token=...) as client:`.

    `extensions` are the URIs activated on every call: all five Profile v2 extensions by default, `()` for
    the core tier. Against a plain A2A agent the same calls work and the views simply carry no profile data.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        extensions: Sequence[str] = PROFILE_V2,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.url = agent_url(url)
        self.extensions = list(extensions)
        self._token, self._timeout = token, timeout
        self._own_http = http is None
        self._http = http
        self._client: Client | None = None
        self._card: AgentCard | None = None
        # The `error` member of the last failed answer's JSON body: the a2a-sdk keeps only the message of a
        # JSON-RPC error (its ErrorInfo `reason` is dropped) and an HTTP error's body not at all.
        self.last_error: Any = None

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def open(self) -> None:
        """Fetch the Agent Card and build the a2a-sdk client on its JSON-RPC interface."""
        if self._http is None:
            headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
            self._http = httpx.AsyncClient(
                headers=headers, timeout=self._timeout, event_hooks={"response": [self._keep_error]}
            )
        # The Runtime offers no streaming (card: streaming false); polling GetTask works with every agent.
        config = ClientConfig(streaming=False, httpx_client=self._http)
        try:
            # Resolved here rather than inside create_client so the card stays readable (active_extensions).
            self._card = await A2ACardResolver(self._http, self.url).get_agent_card()
            self._client = await create_client(self._card, client_config=config)
        except ValueError as exc:  # create_client's "no compatible transports found"
            await self.close()
            raise ClientError(
                f"the Agent at {self.url} offers no interface this client speaks: {exc}"
            ) from exc
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
        if self._http is not None and self._own_http:  # a caller's own httpx client stays open for them
            await self._http.aclose()
            self._http = None

    @property
    def card(self) -> AgentCard:
        if self._card is None:
            raise ClientError("not connected: use `async with NylorunClient(...)` or call open()")
        return self._card

    @property
    def active_extensions(self) -> list[str]:
        """The requested extensions the Agent's card declares: empty means the core tier."""
        declared = {extension.uri for extension in self.card.capabilities.extensions}
        return [uri for uri in self.extensions if uri in declared]

    # ------------------------------------------------------------------ A2A operations
    async def send(
        self,
        text: str,
        *,
        context_id: str | None = None,
        task_id: str | None = None,
        wait: bool = True,
        metadata: dict[str, Any] | None = None,
        extensions: Sequence[str] = (),
        push_url: str | None = None,
    ) -> TaskView | MessageView:
        """SendMessage. `wait=False` sets `returnImmediately`: the answer is the task as just created, and
        the caller follows it with `watch`. `metadata`/`extensions` are the message's own (extension data).
        `push_url` registers a push config for the task with the message (`configuration.taskPushNotificationConfig`)."""
        message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
        if context_id:
            message.context_id = context_id
        if task_id:
            message.task_id = task_id
        if metadata:
            message.metadata.update(metadata)
        message.extensions.extend(extensions)
        configuration = SendMessageConfiguration(return_immediately=not wait)
        if push_url:
            configuration.task_push_notification_config.CopyFrom(TaskPushNotificationConfig(url=push_url))
        request = SendMessageRequest(message=message, configuration=configuration)
        result: TaskView | MessageView | None = None
        async for response in self._sdk.send_message(request, context=self._context()):
            if response.HasField("task"):
                result = task_view(response.task)
            elif response.HasField("message"):
                result = message_view(response.message)
        if result is None:
            raise ClientError("the Agent answered SendMessage with neither a task nor a message")
        return result

    async def get(self, task_id: str, *, history_length: int | None = None) -> TaskView:
        request = GetTaskRequest(id=task_id)
        if history_length is not None:
            request.history_length = history_length
        return task_view(await self._sdk.get_task(request, context=self._context()))

    async def list_tasks(
        self, *, context_id: str | None = None, state: str | None = None, page_size: int | None = None
    ) -> list[TaskView]:
        """ListTasks, newest status first, following the cursor over every page (with their artifacts)."""
        request = ListTasksRequest(include_artifacts=True)
        if context_id:
            request.context_id = context_id
        if state:
            request.status = TaskState.Value(state)
        if page_size:
            request.page_size = page_size
        tasks: list[TaskView] = []
        while True:
            page = await self._sdk.list_tasks(request, context=self._context())
            tasks.extend(task_view(task) for task in page.tasks)
            if not page.next_page_token:
                return tasks
            request.page_token = page.next_page_token

    async def cancel(self, task_id: str) -> TaskView:
        return task_view(await self._sdk.cancel_task(CancelTaskRequest(id=task_id), context=self._context()))

    async def watch(
        self, task_id: str, *, interval: float = 0.25, answered: Collection[str] = ()
    ) -> AsyncIterator[TaskView]:
        """Poll GetTask; yield each change, and stop after the task ends or waits for a person: for an answer,
        or (effects/v1 `uncertain`) for an operator to check an effect whose outcome was lost.

        `answered` holds `waiting_key`s already answered: right after an answer the task may still show
        that interaction for a moment, and that is no reason to stop (and ask again).
        """
        last: dict[str, Any] | None = None
        while True:
            # historyLength 0: the status carries all a watcher shows; the history can be long.
            task = await self.get(task_id, history_length=0)
            seen = task.to_json()
            if seen != last:
                last = seen
                yield task
            if task.terminal or task.uncertain or (task.interrupted and task.waiting_key not in answered):
                return
            await asyncio.sleep(interval)

    # ------------------------------------------------------------------ interactions/v1 answers
    async def open_interaction(self, task_id: str) -> tuple[TaskView, Interaction]:
        """The interaction the task waits for, or NoOpenInteraction saying why there is none."""
        task = await self.get(task_id, history_length=0)
        if task.interaction is not None and task.interrupted:
            return task, task.interaction
        if not task.interrupted:
            raise NoOpenInteraction(f"Task {task_id} waits for no answer (it is {task.short_state})")
        if task.state == "TASK_STATE_INPUT_REQUIRED":
            raise NoOpenInteraction(
                f"Task {task_id} asks in text only (core tier): answer it with text: {task.text}"
            )
        raise NoOpenInteraction(
            f"Task {task_id} is {task.short_state} but carries no interactions/v1 data (core tier: the agent "
            f"asks in text only, and a text reply never approves): {task.text}"
        )

    async def approve(
        self, task_id: str, approved: bool = True, *, interaction_id: str | None = None, wait: bool = True
    ) -> TaskView | MessageView:
        """Approve (or deny) the open approval, or confirm (or decline) the open connection."""
        if interaction_id is None:
            _, interaction = await self.open_interaction(task_id)
            if interaction.kind == "question":
                raise NoOpenInteraction(f"Task {task_id} asks a question, not for consent: answer it instead")
            interaction_id = interaction.interaction_id
        text = "approved" if approved else "denied"
        return await self._answer(task_id, interaction_id, text, {"approved": approved}, wait)

    async def deny(
        self, task_id: str, *, interaction_id: str | None = None, wait: bool = True
    ) -> TaskView | MessageView:
        return await self.approve(task_id, False, interaction_id=interaction_id, wait=wait)

    async def complete_connection(
        self, task_id: str, connected: bool = True, *, interaction_id: str | None = None, wait: bool = True
    ) -> TaskView | MessageView:
        """Complete the open connection: say it is connected (or that it will not be)."""
        if interaction_id is None:
            _, interaction = await self.open_interaction(task_id)
            if interaction.kind != "connection":
                raise NoOpenInteraction(f"Task {task_id} waits for {_a(interaction.kind)}, not a connection")
            interaction_id = interaction.interaction_id
        text = "connected" if connected else "not connected"
        return await self._answer(task_id, interaction_id, text, {"approved": connected}, wait)

    async def answer(
        self, task_id: str, value: Any, *, interaction_id: str | None = None, wait: bool = True
    ) -> TaskView | MessageView:
        """Answer the open question with `value`. A question with no typed data (core tier) is answered
        with the value as text, which a question accepts (docs/calling/index.md#the-support-walk-through)."""
        if interaction_id is None:
            task = await self.get(task_id, history_length=0)
            if task.interaction is None and task.state == "TASK_STATE_INPUT_REQUIRED":
                return await self.send(_text(value), task_id=task_id, wait=wait)
            _, interaction = await self.open_interaction(task_id)
            if interaction.kind != "question":
                raise NoOpenInteraction(
                    f"Task {task_id} waits for {_a(interaction.kind)}, which takes y or n, not a value"
                )
            interaction_id = interaction.interaction_id
        return await self._answer(task_id, interaction_id, _text(value), {"value": value}, wait)

    async def _answer(
        self, task_id: str, interaction_id: str, text: str, fields: dict[str, Any], wait: bool
    ) -> TaskView | MessageView:
        payload = {INTERACTIONS: {"interactionId": interaction_id, **fields}}
        return await self.send(text, task_id=task_id, wait=wait, metadata=payload, extensions=[INTERACTIONS])

    # ------------------------------------------------------------------ internals
    @property
    def _sdk(self) -> Client:
        if self._client is None:
            raise ClientError("not connected: use `async with NylorunClient(...)` or call open()")
        return self._client

    async def _keep_error(self, response: httpx.Response) -> None:
        if response.is_success and "json" not in response.headers.get("content-type", ""):
            return
        await response.aread()  # kept by httpx: the a2a-sdk reads the same body after this hook
        try:
            body = response.json()
        except ValueError:
            return
        if isinstance(body, dict) and body.get("error") is not None:
            self.last_error = body["error"]

    def _context(self) -> ClientCallContext | None:
        if not self.extensions:
            return None
        return ClientCallContext(service_parameters={"A2A-Extensions": ",".join(self.extensions)})


def agent_url(url: str) -> str:
    """The Agent's URL from itself or from its card's URL (the `serve` banner prints those), slash or not."""
    return url.strip().rstrip("/").removesuffix(CARD_PATH).rstrip("/")


def _a(kind: str) -> str:
    return f"an {kind}" if kind[:1] in "aeiou" else f"a {kind}"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)
