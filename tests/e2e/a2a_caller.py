"""A thin test helper around the a2a-sdk 1.3.0 client: the real caller, over real HTTP, with results as
ProtoJSON dicts so assertions read like the wire."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Self, TypeVar

import httpx
from a2a.client import ClientCallContext, ClientConfig, create_client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
)
from google.protobuf import json_format

INTERACTIONS = "https://docs.nylorun.com/a2a/interactions/v1"
EFFECTS = "https://docs.nylorun.com/a2a/effects/v1"
PROGRESS = "https://docs.nylorun.com/a2a/progress/v1"
TELEMETRY = "https://docs.nylorun.com/a2a/telemetry/v1"
FILES = "https://docs.nylorun.com/a2a/files/v1"
PROFILE = [INTERACTIONS, EFFECTS, PROGRESS, TELEMETRY, FILES]
T = TypeVar("T")


def run(body: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(body())  # type: ignore[arg-type]


class Caller:
    """One subject calling one Agent, with a chosen set of profile extensions activated."""

    def __init__(self, url: str, token: str, extensions: list[str] | None) -> None:
        self.url, self.token, self.extensions = url, token, extensions
        self.context_id = str(uuid.uuid4())

    async def __aenter__(self) -> Self:
        self._http = httpx.AsyncClient(headers={"Authorization": f"Bearer {self.token}"}, timeout=60)
        self._client = await create_client(
            self.url, client_config=ClientConfig(streaming=False, httpx_client=self._http)
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.close()
        await self._http.aclose()

    def _context(self) -> ClientCallContext | None:
        if not self.extensions:
            return None
        return ClientCallContext(service_parameters={"A2A-Extensions": ",".join(self.extensions)})

    async def send(
        self,
        text: str = "hello",
        *,
        task_id: str | None = None,
        answer: dict[str, Any] | None = None,
        message_id: str | None = None,
        return_immediately: bool = False,
    ) -> dict[str, Any]:
        message = Message(
            message_id=message_id or str(uuid.uuid4()),
            role=Role.ROLE_USER,
            parts=[Part(text=text)],
            context_id=self.context_id,
        )
        if task_id:
            message.task_id = task_id
        if answer is not None:
            message.metadata.update({INTERACTIONS: answer})
            message.extensions.append(INTERACTIONS)
        request = SendMessageRequest(
            message=message, configuration=SendMessageConfiguration(return_immediately=return_immediately)
        )
        result: dict[str, Any] = {}
        async for response in self._client.send_message(request, context=self._context()):
            result = json_format.MessageToDict(response)
        return result.get("task") or result

    async def get(self, task_id: str, history_length: int | None = None) -> dict[str, Any]:
        request = GetTaskRequest(id=task_id)
        if history_length is not None:
            request.history_length = history_length
        return json_format.MessageToDict(await self._client.get_task(request, context=self._context()))

    async def cancel(self, task_id: str) -> dict[str, Any]:
        task = await self._client.cancel_task(CancelTaskRequest(id=task_id), context=self._context())
        return json_format.MessageToDict(task)

    async def wait_for(
        self, task_id: str, done: Callable[[dict[str, Any]], bool], timeout: float = 20
    ) -> dict[str, Any]:
        """Poll GetTask until `done(task)`: bounded, for states reached after an answer returned."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            task = await self.get(task_id)
            if done(task) or asyncio.get_running_loop().time() > deadline:
                return task
            await asyncio.sleep(0.05)


def state(task: dict[str, Any]) -> str:
    return str(task["status"]["state"])


def status_ext(task: dict[str, Any], uri: str) -> Any:
    return ((task["status"].get("message") or {}).get("metadata") or {}).get(uri)
