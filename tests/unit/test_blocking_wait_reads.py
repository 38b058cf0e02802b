"""How a blocking SendMessage waits for a turn that runs elsewhere (Step Functions, deployed): what it reads while
the turn runs, when a turn's action in the same process wakes it, and what its read schedule costs."""

from __future__ import annotations

import pytest
from nylorun.adapters.memory import InMemoryContextQueue, InMemoryOrchestrator, InMemoryTaskStore
from nylorun.engine.agent import AgentRegistry
from nylorun.engine.runner import TurnRunner
from nylorun.engine.task_signal import TASK_SIGNAL
from nylorun.engine.turn import Turn
from nylorun.ports import TaskRecord
from nylorun.protocol.models import SendMessageRequest
from nylorun.service.a2a import A2AService
from nylorun.service.a2a.wait_schedule import read_times
from nylorun.service.scheduler import TurnScheduler
from nylorun.settings import Settings
from unit_support import TYPED, agent_of, user_message


def replies(turn: Turn) -> None:
    turn.reply("done")


class LaterOrchestrator(InMemoryOrchestrator):
    """Step Functions as the api function sees it: `start` returns at once; the turn runs later (`run_started`)."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[str] = []

    def start(self, task_id: str, attempt: int = 0) -> None:
        self.started.append(task_id)

    def run_started(self) -> None:
        for task_id in self.started:
            super().start(task_id)
        self.started.clear()


class ReadsCounted(InMemoryTaskStore):
    """Counts the blocking wait's reads; on its `turn_ends_at`-th read the turn runs to its end first."""

    def __init__(self, orchestrator: LaterOrchestrator, turn_ends_at: int) -> None:
        super().__init__()
        self.reads: list[str] = []
        self._orchestrator = orchestrator
        self._turn_ends_at = turn_ends_at
        self._turn_running = False

    def _read(self, kind: str) -> None:
        if self._turn_running:
            return  # the turn's own reads are not the wait's
        self.reads.append(kind)
        if len(self.reads) == self._turn_ends_at:
            self._turn_running = True
            self._orchestrator.run_started()
            self._turn_running = False

    def get(self, task_id: str) -> TaskRecord | None:
        self._read("task")
        return super().get(task_id)

    def head(self, task_id: str) -> dict | None:  # type: ignore[type-arg]
        self._read("task item")
        return super().head(task_id)


def service_over(store: InMemoryTaskStore, orchestrator: InMemoryOrchestrator) -> A2AService:
    registry = AgentRegistry([agent_of(replies)])
    scheduler = TurnScheduler(store, orchestrator, InMemoryContextQueue())
    orchestrator.attach(TurnRunner(store, registry, orchestrator, on_ended=scheduler.ended))
    return A2AService(store, orchestrator, registry, Settings(a2a_wait_ms=60_000, auth="none"), scheduler)


def test_while_the_turn_runs_the_wait_reads_the_task_item_and_the_whole_task_once_at_the_end() -> None:
    # Given a turn that ends only after the blocking wait has read its task three times
    orchestrator = LaterOrchestrator()
    store = ReadsCounted(orchestrator, turn_ends_at=3)
    service = service_over(store, orchestrator)
    # When a caller sends a blocking SendMessage
    request = SendMessageRequest.model_validate({"message": user_message("hello")})
    task = service.send_message(TYPED, request)["task"]
    # Then it answers with the ended turn
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["status"]["message"]["parts"] == [{"text": "done"}]
    # And while the turn ran it read only the task item (DynamoDB: one GetItem, not the history and artifacts),
    # reading the whole task once at once (a fast turn) and once at the end (what it answers with)
    assert store.reads == ["task", "task item", "task item", "task"]


def test_a_turn_action_wakes_a_wait_on_its_own_task_only() -> None:
    # Given a blocking wait watching one task, and another watching a second
    orchestrator = LaterOrchestrator()
    store = InMemoryTaskStore()
    service = service_over(store, orchestrator)
    request = SendMessageRequest.model_validate(
        {"message": user_message("hello"), "configuration": {"returnImmediately": True}}
    )
    task_id = service.send_message(TYPED, request)["task"]["id"]
    with TASK_SIGNAL.watching(task_id) as mine, TASK_SIGNAL.watching("some-other-task") as other:
        # When the turn function runs the turn in the same process (the local Runtime)
        orchestrator.run_started()
        # Then the wait on that task is woken to read it now, and the other is not
        assert mine.is_set()
        assert not other.is_set()


@pytest.mark.parametrize("wait_s", [0.5, 5.0, 27.0])
def test_a_turn_ending_between_reads_is_seen_within_a_tenth_of_its_time_and_at_most_a_second(wait_s: float) -> None:
    # Given the times a blocking wait of `wait_s` reads its task while the turn runs
    times = read_times(wait_s)
    # When a turn ends at any moment of the wait (every millisecond)
    for ms in range(1, int(wait_s * 1000)):
        ended = ms / 1000
        seen = next(t for t in times if t >= ended)
        # Then the wait sees it within max(20 ms, 10 % of the turn's time), and never more than 1 s after
        assert seen - ended <= min(1.0, max(0.02, 0.1 * ended)) + 1e-9


@pytest.mark.parametrize(("wait_s", "most_reads"), [(5.0, 45), (27.0, 70)])
def test_the_reads_of_one_wait_are_bounded_by_the_wait(wait_s: float, most_reads: int) -> None:
    # Given a turn that outlasts the wait: A2aWaitMs's default (5 s), and its deployed maximum (27 s)
    # When the wait reads on its schedule until it ends
    times = read_times(wait_s)
    # Then it has read the task item at most this often (bench/README.md "Blocking SendMessage: how it waits")
    assert len(times) <= most_reads
    assert times[-1] == wait_s
