"""Small shared pieces of the unit tier: the Runtime composed on the in-memory adapters (no AWS, no HTTP, no
threads: a turn runs in the caller's thread when it starts), agents built per test, and callers' messages.

Imported by name (`from unit_support import ...`); a module name no other tests folder uses.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from nylorun.adapters.memory import InMemoryContextQueue, InMemoryOrchestrator, InMemoryTaskStore
from nylorun.adapters.memory.connections import InMemoryConnectionStore
from nylorun.domain.connections import Provider
from nylorun.engine.agent import Agent, AgentRegistry, Skill, TurnFunction
from nylorun.engine.connections import ConnectionDeps
from nylorun.engine.runner import TurnRunner
from nylorun.ports import Owner, TaskRecord
from nylorun.profile.extensions import INTERACTIONS, PROFILE_EXTENSIONS
from nylorun.protocol.errors import A2AError
from nylorun.protocol.models import Message, Part, Role, SendMessageRequest, TaskState
from nylorun.service.a2a import A2AService, Caller
from nylorun.service.connections import ConnectionFlow
from nylorun.service.scheduler import TurnScheduler
from nylorun.settings import Settings

SUBJECT = "alice"
AGENT = "unit"
OWNER = Owner(subject=SUBJECT, agent=AGENT)
# A typed client: every profile extension activated (what it sees is all the Runtime stored).
TYPED = Caller(subject=SUBJECT, agent=AGENT, extensions=tuple(PROFILE_EXTENSIONS))
CORE = Caller(subject=SUBJECT, agent=AGENT)  # a core-tier client: nothing activated


def agent_of(run: TurnFunction, name: str = AGENT) -> Agent:
    agent = Agent(name=name, description="A unit-test agent.", skills=[Skill(id="s", name="S", description="S.")])
    agent.turn(run)
    return agent


class Calls:
    """What an effect function saw: every idempotency key it was called with, in order."""

    def __init__(self, result: Any = "done") -> None:
        self.keys: list[str] = []
        self.result = result

    def __call__(self, key: str) -> Any:
        self.keys.append(key)
        return self.result


class Crash(BaseException):
    """The run dies here (a timeout, an out-of-memory kill): nothing after it is written."""


class DiesOnce(Calls):
    """An effect whose first call dies before the journal learns its outcome."""

    def __call__(self, key: str) -> Any:
        super().__call__(key)
        if len(self.keys) == 1:
            raise Crash()
        return self.result


@dataclass
class Runtime:
    """The service, the runner and the scheduler over one in-memory store, composed as nylorun.wiring does."""

    store: InMemoryTaskStore
    orchestrator: InMemoryOrchestrator
    queue: InMemoryContextQueue
    scheduler: TurnScheduler
    runner: TurnRunner
    service: A2AService
    settings: Settings = field(default_factory=Settings)
    connections: Any = None  # the ConnectionFlow (docs/writing/connections.md)

    def send(self, text: str = "hello", caller: Caller = TYPED, **message: Any) -> dict[str, Any]:
        """SendMessage as a caller sends it. The in-memory turn has run by the time it answers; the blocking
        wait (a2aWaitMs 0) reads the task once more, so the answer shows where the turn stopped."""
        request = SendMessageRequest.model_validate({"message": user_message(text, **message)})
        return dict(self.service.send_message(caller, request)["task"])

    def record(self, task_id: str) -> TaskRecord:
        record = self.store.get(task_id)
        assert record is not None
        return record


class FakeOAuth:
    """A provider that answers every code with fresh tokens (the OAuth client port, no HTTP)."""

    def __init__(self) -> None:
        self.issued = 0

    def authorization_url(self, provider: Provider, redirect_uri: str, scopes: list[str], state: str, verifier: str) -> str:
        return f"{provider.authorize_url}?{urlencode({'state': state, 'scope': ' '.join(scopes)})}"

    def exchange(self, provider: Provider, redirect_uri: str, code: str, code_verifier: str) -> dict[str, Any]:
        self.issued += 1
        return {"access_token": f"at-{self.issued}", "refresh_token": f"rt-{self.issued}", "expires_at": 2**40}

    def refresh(self, provider: Provider, refresh_token: str) -> dict[str, Any]:
        return self.exchange(provider, "", "", "")

    def revoke(self, provider: Provider, token: str) -> None:
        pass


PAYMENTS = Provider.model_validate(
    {"name": "payments", "authorizeUrl": "https://pay.test/authorize", "tokenUrl": "https://pay.test/token", "clientId": "c"}
)


def runtime(*agents: Agent, store: InMemoryTaskStore | None = None, strict_components: bool = True) -> Runtime:
    store = store or InMemoryTaskStore()
    orchestrator, queue = InMemoryOrchestrator(), InMemoryContextQueue()
    scheduler = TurnScheduler(store, orchestrator, queue)
    registry = AgentRegistry(agents)
    connections = ConnectionDeps(InMemoryConnectionStore(), FakeOAuth(), {"payments": PAYMENTS}, None, "https://rt.test")
    runner = TurnRunner(
        store, registry, orchestrator, on_ended=scheduler.ended, strict_components=strict_components,
        connections=connections,
    )
    orchestrator.attach(runner)
    settings = Settings(a2a_wait_ms=0, auth="none")
    answers: list[A2AService] = []
    flow = ConnectionFlow(store, connections, lambda *a: answers[0]._answer(*a))
    service = A2AService(store, orchestrator, registry, settings, scheduler, connections=flow)
    answers.append(service)
    return Runtime(store, orchestrator, queue, scheduler, runner, service, settings, flow)


def connect(rt: Runtime, task: dict[str, Any]) -> None:
    """The person consents: the flow started from the open connection, the provider's redirect completed."""
    interaction = rt.record(task["id"]).interaction
    assert interaction is not None
    waiting = rt.connections.waiting(task["id"], interaction.interaction_id)
    state = parse_qs(urlsplit(rt.connections.start(waiting, "browser")).query)["state"][0]
    rt.connections.complete(state, "code", "browser")


def refused(rt: Runtime, **message: Any) -> A2AError:
    """The A2A error a SendMessage gets (the test fails if it gets a task)."""
    with pytest.raises(A2AError) as caught:
        rt.send(**message)
    return caught.value


def user_message(text: str = "hello", **fields: Any) -> dict[str, Any]:
    return {"messageId": f"m-{uuid.uuid4()}", "role": "ROLE_USER", "parts": [{"text": text}], **fields}


def answer(task: dict[str, Any], interaction_id: str | None = None, **payload: Any) -> dict[str, Any]:
    """The interactions/v1 reply to a task's open interaction, as a typed client sends it."""
    interaction_id = interaction_id or open_interaction(task)["interactionId"]
    return {
        "taskId": task["id"],
        "metadata": {INTERACTIONS: {"interactionId": interaction_id, **payload}},
        "extensions": [INTERACTIONS],
    }


def open_interaction(task: dict[str, Any]) -> dict[str, Any]:
    return dict(task["status"]["message"]["metadata"][INTERACTIONS])


def status_text(task: dict[str, Any]) -> str:
    return "\n".join(p.get("text", "") for p in task["status"]["message"]["parts"])


def state(task: dict[str, Any]) -> TaskState:
    return TaskState(task["status"]["state"])


def agent_texts(record: TaskRecord) -> list[str]:
    return [m.text() for m in record.history if m.role == Role.AGENT]


def message(text: str) -> Message:
    return Message(message_id=f"m-{uuid.uuid4()}", role=Role.USER, parts=[Part(text=text)])


class AnotherAnswerFirst(InMemoryTaskStore):
    """A store where, between the service reading the task and writing the answer, another answer (`racer`:
    another caller's, or the first send of a retried one) is written: the race two answers to one interaction
    make."""

    racer: Any = None

    def answer_interaction(self, *args: Any, **kwargs: Any) -> None:
        racer, self.racer = self.racer, None
        if racer is not None:
            racer()
        super().answer_interaction(*args, **kwargs)
