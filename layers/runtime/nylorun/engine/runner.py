"""The turn function's actions, called by the state machine (statemachines/turn.asl.json).

* run       run (or replay) the agent; returns the outcome the state machine branches on
* park      keep the callback token beside the open interaction (WaitForAnswer)
* expire    nobody answered in time: the task fails
* fail      the run failed past its retries: the task fails, with no internals in the message
* deadline  a lost outcome waited for an operator past its deadline (WaitForOperator): the task fails, unless
            an operator resolved it meanwhile (docs/operate.md, "Lost outcomes")

Each action is safe to run twice on the same input: Step Functions and Lambda both retry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

from aws_lambda_powertools.metrics import MetricUnit

from nylorun.domain.messages import agent_text, current_trace_id, totals, with_telemetry
from nylorun.engine.agent import AgentRegistry
from nylorun.engine.connections import ConnectionDeps
from nylorun.engine.delegation import DelegationDeps
from nylorun.engine.files import FileFetchFailed, FileService
from nylorun.engine.replay import Interrupted, NonDeterministicAgent, OutcomeLost, Replay, Waiting, opaque_id
from nylorun.engine.task_signal import TASK_SIGNAL
from nylorun.engine.turn import Finished, Turn, TurnFailed, TurnOutput
from nylorun.observability import logger, metrics
from nylorun.ports import (
    Owner,
    StateConflict,
    TaskRecord,
    TaskStore,
    TooLarge,
    TurnCanceled,
    TurnOrchestrator,
    Uncertainty,
)
from nylorun.profile.status import UNKNOWN_OUTCOME_TEXT, interaction_message, uncertain_message, with_plan
from nylorun.protocol.models import INTERRUPTED_STATES, TaskState, TaskStatus

ACTIVE = frozenset({TaskState.SUBMITTED, TaskState.WORKING})
NOT_TERMINAL = frozenset({TaskState.SUBMITTED, TaskState.WORKING, *INTERRUPTED_STATES})
# The log lines of an error in an Agent's own code (the local Runtime also prints these as tracebacks).
AGENT_RAISED = "agent raised"
NOT_DETERMINISTIC = "agent is not deterministic on replay"
AGENT_ERRORS = (AGENT_RAISED, NOT_DETERMINISTIC)


class Outcome(TypedDict):
    outcome: str  # "ended" | "interrupted" | "uncertain" | "waiting" (for a delegate)
    interactionId: str | None


def _ended() -> Outcome:
    return {"outcome": "ended", "interactionId": None}


class TurnRunner:
    def __init__(
        self,
        store: TaskStore,
        registry: AgentRegistry,
        orchestrator: TurnOrchestrator,
        on_ended: Callable[[Owner, str], object] = lambda owner, context_id: None,
        files: FileService | None = None,
        *,
        strict_components: bool = True,
        delegation: DelegationDeps | None = None,
        connections: ConnectionDeps | None = None,
    ) -> None:
        self._delegation, self._connections = delegation, connections
        self._files = files
        # An invalid component: an error in the agent's code (development) or a dropped part (deployed).
        self._strict_components = strict_components
        self._store = store
        self._registry = registry
        self._orchestrator = orchestrator
        # Called whenever a turn has ended, so the context's next queued turn starts (idempotent).
        self._on_ended = on_ended

    def handle(self, event: dict[str, Any]) -> Outcome:
        task_id = str(event["taskId"])
        try:
            return self._act(task_id, event)
        finally:
            # A blocking SendMessage on this task in this process (the local Runtime) reads it now, not at its
            # next scheduled read.
            TASK_SIGNAL.written(task_id)

    def _act(self, task_id: str, event: dict[str, Any]) -> Outcome:
        action = event.get("action", "run")
        logger.append_keys(task_id=task_id)
        if action == "run":
            return self.run(task_id)
        if action == "park":
            return self.park(task_id, str(event["interactionId"]), str(event["token"]))
        if action == "expire":
            metrics.add_metric(name="InteractionExpired", unit=MetricUnit.Count, value=1)
            return self._end_failed(task_id, "No answer arrived in time; the task has ended.", NOT_TERMINAL)
        if action == "fail":
            return self._end_failed(task_id, "The agent could not complete this turn.", NOT_TERMINAL)
        if action == "deadline":
            return self.deadline(task_id, int(event["attempt"]))
        raise ValueError(f"unknown action {action!r}")

    # ------------------------------------------------------------------ run
    def run(self, task_id: str) -> Outcome:
        record = self._store.get(task_id)
        if record is None:
            logger.error("turn for a task that does not exist")
            return _ended()
        logger.append_keys(context_id=record.context_id, agent=record.owner.agent)
        if record.state.terminal:
            # Canceled, or finished by an earlier run that may have died before starting the next turn.
            self._on_ended(record.owner, record.context_id)
            return _ended()
        if record.state.interrupted and record.interaction is not None:
            # A rerun while a person has not answered yet: keep waiting on the same interaction.
            return {"outcome": "interrupted", "interactionId": record.interaction.interaction_id}
        agent = self._registry.get(record.owner.agent)
        if agent is None or agent.run is None:
            return self._end_failed(task_id, "This agent is no longer served.", ACTIVE)
        if record.state == TaskState.SUBMITTED:
            if self._store.context_state(record.owner, record.context_id)["activeTask"] != task_id:
                # One turn at a time per context: a queued turn runs only once it holds the context.
                logger.warning("turn started before it held its context; not running it")
                return _ended()
            try:
                record = self._start(record)
            except StateConflict:
                return _ended()
            metrics.add_metric(name="TurnStarted", unit=MetricUnit.Count, value=1)

        output = TurnOutput(plan=list(record.plan))
        replay = Replay(self._store, task_id, self._store.journal(task_id))
        turn = Turn(
            self._store, record, replay, output, self._files, strict=self._strict_components, delegation=self._delegation,
            connections=self._connections,
        )
        trace_id = current_trace_id(task_id)
        try:
            try:
                agent.run(turn)
            except Finished:
                pass
        except Interrupted as stop:
            return self._interrupt(record, output, stop)
        except Waiting as waiting:
            # Waiting for a delegate: the task stays WORKING (its progress is written); the state machine
            # parks until the delegate's callback or the poll interval wakes it.
            metrics.add_metric(name="DelegateWait", unit=MetricUnit.Count, value=1)
            return {"outcome": "waiting", "interactionId": waiting.wait_id}
        except OutcomeLost as lost:
            logger.warning("effect outcome lost", extra={"effect_id": lost.effect_id})
            metrics.add_metric(name="EffectUncertain", unit=MetricUnit.Count, value=1)
            uncertain = uncertain_message(task_id, record.context_id, lost.effect_id, output.plan, output.view)
            # Marked as waiting for an operator (`nylorun admin uncertain`) in this attempt; the state
            # machine waits (WaitForOperator) and then calls `deadline` with the same attempt.
            lost_in = Uncertainty(effect_id=lost.effect_id, seq=lost.seq, attempt=record.attempt)
            self._safely(
                lambda: self._store.set_status(
                    task_id,
                    TaskStatus(state=TaskState.WORKING, message=uncertain),
                    expect={TaskState.WORKING},
                    plan=list(output.plan),
                    uncertain=lost_in,
                )
            )
            return {"outcome": "uncertain", "interactionId": None}
        except (TurnCanceled, StateConflict):
            logger.info("turn stopped: the task changed under it (canceled)")
            self._on_ended(record.owner, record.context_id)
            return _ended()
        except FileFetchFailed as failed:
            # A caller's url file could not be fetched: the turn fails and says which file.
            return self._end_failed(task_id, f"Could not fetch the file {failed.name}: {failed.reason}", ACTIVE)
        except TurnFailed as failed:
            # The agent's own words for why it stopped (nylorun.models: its step cap), shown as it wrote them.
            logger.warning("agent ended its turn failed")
            return self._end_failed(task_id, failed.text, ACTIVE)
        except NonDeterministicAgent:
            logger.exception(NOT_DETERMINISTIC)
            return self._end_failed(task_id, "The agent could not complete this turn.", ACTIVE)
        except TooLarge as large:
            return self._too_large(task_id, large)
        except Exception:  # noqa: BLE001 - any error of the agent's code ends its turn
            # The agent's own error: log it, never show it (no stack trace reaches a caller).
            logger.exception(AGENT_RAISED)
            return self._end_failed(task_id, "The agent could not complete this turn.", ACTIVE)

        reply = output.reply or agent_text(record, "Done.")
        state = TaskState.REJECTED if output.rejected else TaskState.COMPLETED
        # The totals from the journal as this run wrote it (only this run writes its task's journal): not read again
        reply = with_telemetry(with_plan(reply, output.plan), totals(replay.journal, trace_id))
        try:
            self._safely(
                lambda: self._store.set_status(
                    task_id,
                    TaskStatus(state=state, message=reply),
                    expect={TaskState.WORKING},
                    history=[reply],
                    plan=list(output.plan),
                )
            )
        except TooLarge as large:
            return self._too_large(task_id, large)
        metrics.add_metric(name="TurnEnded", unit=MetricUnit.Count, value=1)
        self._on_ended(record.owner, record.context_id)
        return _ended()

    def _start(self, record: TaskRecord) -> TaskRecord:
        self._store.set_status(record.task_id, TaskStatus(state=TaskState.WORKING), expect={TaskState.SUBMITTED})
        return self._store.get(record.task_id) or record

    def _interrupt(self, record: TaskRecord, output: TurnOutput, stop: Interrupted) -> Outcome:
        # Profile v2: approval and connection → AUTH_REQUIRED; question → INPUT_REQUIRED.
        state = TaskState.INPUT_REQUIRED if stop.interaction.kind == "question" else TaskState.AUTH_REQUIRED
        message = interaction_message(record.task_id, record.context_id, stop.interaction, output.plan, output.view)
        try:
            self._store.set_status(
                record.task_id,
                TaskStatus(state=state, message=message),
                expect={TaskState.WORKING},
                history=[message],
                interaction=stop.interaction,
                interaction_seq=stop.seq,
                plan=list(output.plan),
            )
        except StateConflict:
            return _ended()
        except TooLarge as large:
            return self._too_large(record.task_id, large)
        metrics.add_metric(name="InteractionRequested", unit=MetricUnit.Count, value=1)
        return {"outcome": "interrupted", "interactionId": stop.interaction.interaction_id}

    # ------------------------------------------------------------------ park
    def park(self, task_id: str, interaction_id: str, token: str) -> Outcome:
        self._store.put_wait_token(task_id, interaction_id, token)
        # The answer (or the delegate's callback) may have arrived before the token was stored: then nobody else
        # will send it.
        record = self._store.get(task_id)
        if interaction_id.startswith("wait-"):
            open_waits = [
                seq for seq, entry in self._store.journal(task_id).items()
                if entry.kind == "wait" and not entry.finished and opaque_id(task_id, seq, "wait") == interaction_id
            ]
            still_open = record is not None and record.state == TaskState.WORKING and bool(open_waits)
        else:
            still_open = (
                record is not None
                and record.state.interrupted
                and record.interaction is not None
                and record.interaction.interaction_id == interaction_id
            )
        if not still_open:
            if record is None or record.state.terminal:
                self._orchestrator.abandon(token, "The task ended while waiting")
            else:
                self._orchestrator.resume(token)
        return {"outcome": "parked", "interactionId": interaction_id}

    # ------------------------------------------------------------------ deadline (docs/operate.md)
    def deadline(self, task_id: str, attempt: int) -> Outcome:
        """Nobody resolved the lost outcome of this attempt in time: the task fails saying the step's outcome is
        unknown, and its context moves on. An operator who resolved it meanwhile started a new attempt (the mark
        is gone or names a later attempt), and one who failed it ended it: then nothing is done."""
        return self._end_failed(task_id, UNKNOWN_OUTCOME_TEXT, frozenset({TaskState.WORKING}), uncertain_in=attempt)

    # ------------------------------------------------------------------ ends
    def _too_large(self, task_id: str, large: TooLarge) -> Outcome:
        """The agent's output passed a size limit (nylorun.limits). A rerun would write the same output, so the
        turn does not fail by retries: the task FAILS now, saying which limit, and keeps what fit."""
        logger.warning("agent output over the size budget", extra={"limit": str(large)})
        return self._end_failed(task_id, f"The agent's output exceeded the task's size budget: {large}.", ACTIVE)

    def _end_failed(
        self, task_id: str, text: str, expect: frozenset[TaskState], *, uncertain_in: int | None = None
    ) -> Outcome:
        record = self._store.get(task_id)
        if record is None or record.state.terminal:
            return _ended()
        message = with_telemetry(
            agent_text(record, text), totals(self._store.journal(task_id), current_trace_id(task_id))
        )
        try:
            self._store.set_status(
                task_id,
                TaskStatus(state=TaskState.FAILED, message=message),
                expect=expect,
                history=[message],
                enforce_budget=False,  # the Runtime's own closing message: counted, never refused
                expect_uncertain=uncertain_in,
            )
        except StateConflict:
            logger.info("task changed before the final write; leaving it as it is")
            if uncertain_in is not None:
                return _ended()  # an operator resolved it meanwhile: the resumed attempt holds the context
        else:
            if uncertain_in is not None:
                metrics.add_metric(name="UncertainExpired", unit=MetricUnit.Count, value=1)
        metrics.add_metric(name="TurnFailed", unit=MetricUnit.Count, value=1)
        self._on_ended(record.owner, record.context_id)
        return _ended()

    @staticmethod
    def _safely(write: Any) -> None:
        """A final write that finds the task changed (canceled meanwhile) has nothing left to do."""
        try:
            write()
        except StateConflict:
            logger.info("task changed before the final write; leaving it as it is")
