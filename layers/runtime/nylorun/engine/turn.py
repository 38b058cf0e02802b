"""The `Turn` an agent's code receives: exactly the surface docs/writing/index.md lists, nothing more.

The `Turn` delegates every journaled operation (effects, interactions, usage) and every caller-visible write to
the turn's `Replay` (engine/replay.py), which makes a rerun of the agent durable, and renders its messages with
`profile/status.py`. What the agent left for the runner (the plan, the reply, whether it rejected) is kept in a
`TurnOutput` the runner passes in and reads after the agent returns.

What an agent shows a caller is repaired to well-formed Unicode where the Turn takes it (`protocol/text.py`,
`repaired`; the decision is in `profile/status.py`).

Components (`show`, and `Component`s in `reply` and `artifact`: profile/components.py, docs/components.md) are
validated where the Turn takes them. Decision: one its kind refuses is an `InvalidComponent` raised in the agent's
code when the Runtime runs for development (`nylorun serve`, `sam local`: `strict`), so the mistake shows where it
was made; deployed, the part is dropped with a warning log and the `ComponentDropped` metric, and the turn goes on
(an invalid payload is dropped: docs/decisions/0020-components-and-push-config-lifetime.md), so a model's malformed
table never fails a person's refund.
"""

from __future__ import annotations

import posixpath
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from nylorun.domain.behalf import authenticated_subject
from nylorun.domain.files import clean_path
from nylorun.domain.files import scope as file_scope
from nylorun.domain.ids import derive_task_id
from nylorun.engine import handover
from nylorun.engine.connections import Connection, ConnectionDeps, Declined, authorization_url, connect
from nylorun.engine.delegation import Credentials, Delegated, Delegation, DelegationDeps
from nylorun.engine.files import FETCH_EFFECT, WRITE_EFFECT, FileHandle, FileService
from nylorun.engine.output import TurnOutput
from nylorun.engine.replay import EffectFunction, Interrupted, NonDeterministicAgent, OutcomeLost, Replay
from nylorun.observability import logger, metrics
from nylorun.ports import TaskRecord, TaskStore, TurnCanceled
from nylorun.profile.components import COMPONENTS, Component, InvalidComponent
from nylorun.profile.extensions import (
    FILES,
    MAX_PLAN_STEPS,
    FileVersion,
    InteractionKind,
    PlanStep,
    StepState,
    with_extension,
)
from nylorun.profile.status import ANSWERED_TEXT, agent_message, progress_message
from nylorun.protocol.models import Artifact, Message, Part, Role, TaskState, TaskStatus
from nylorun.protocol.text import repaired


class Finished(BaseException):
    """`turn.reject()` ends the turn early (a BaseException, like the signals in engine/replay.py)."""


class TurnFailed(Exception):
    """Raised by an agent's code to end its turn FAILED with `text` as the status a caller reads (any other error
    shows a generic text). Profile v2: the text is shown as it is, so it must name no tool, argument or result."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class Turn:
    """What an agent's turn function works with: the Runtime makes one for every run of the turn function.

    Read the caller's message, show progress, run effects, ask a person, and reply. The guide with examples is
    docs/writing/index.md; every method that refuses a value raises `BadTurnArgument` naming it."""

    def __init__(
        self,
        store: TaskStore,
        record: TaskRecord,
        replay: Replay,
        output: TurnOutput,
        files: FileService | None = None,
        *,
        strict: bool = True,
        delegation: DelegationDeps | None = None,
        connections: ConnectionDeps | None = None,
    ) -> None:
        self._delegation, self._connections = delegation, connections
        self._strict = strict  # an invalid component raises (development) or is dropped (deployed)
        self._store = store
        self._record = record
        self._replay = replay
        self._output = output
        self._files = files
        self._inbound: list[FileHandle] | None = None
        first_user = next((m for m in record.history if m.role == Role.USER), None)
        assert first_user is not None, "a turn always starts from a caller's message"
        self._message: Message = first_user

    # ------------------------------------------------------------------ what the agent reads
    @property
    def message(self) -> Message:
        """The caller's message that started this turn."""
        return self._message

    @property
    def task_id(self) -> str:
        """This turn's task id (Profile v2: one per turn, made from the context and the turn)."""
        return self._record.task_id

    @property
    def context_id(self) -> str:
        """The context (conversation) this turn belongs to."""
        return self._record.context_id

    @property
    def subject(self) -> str:
        """Who the caller acts for (Profile v2): the subject it authenticated as (for a delegating identity, without
        the scope of the caller it acts on behalf of: nylorun.domain.behalf)."""
        return authenticated_subject(self._record.owner.subject)

    @property
    def text(self) -> str:
        """The text of the caller's message: its text parts joined."""
        return self._message.text()

    @property
    def history(self) -> list[Message]:
        """This task's messages so far, oldest first (the caller's, the agent's, and the answers to its questions)."""
        return list(self._record.history)

    def earlier_turns(self, limit: int = 10) -> list[Message]:
        """The history of this context's `limit` turns before this one, oldest first: the conversation so far (one
        turn at a time per context, so they ended before this one started and a rerun reads the same). Read by
        task id (Profile v2: made from the context and the turn), so the turn function needs no index."""
        owner, turns = self._record.owner, range(self._record.turn - 1, max(0, self._record.turn - 1 - limit), -1)
        records = [self._store.get(derive_task_id(owner, self.context_id, turn)) for turn in turns]
        return [m for record in reversed(records) if record is not None and record.state.terminal for m in record.history]

    # ------------------------------------------------------------------ progress (caller-visible)
    def plan(self, *labels: str) -> None:
        """Set the plan (progress/v1), all steps pending. Profile v2 caps a plan at 20 steps: the rest are
        dropped (and logged), so a long plan never fails a turn."""
        labels = tuple(handover.text("turn.plan", f"label {i}", label) for i, label in enumerate(labels))
        if len(labels) > MAX_PLAN_STEPS:
            logger.warning("plan capped", extra={"steps": len(labels), "cap": MAX_PLAN_STEPS})
        self._output.plan = [PlanStep(label=repaired(label)[:200]) for label in labels[:MAX_PLAN_STEPS]]
        self._replay.show(self._write_progress)

    def mark(self, step: int | str, state: StepState, note: str | None = None) -> None:
        """Mark one plan step (by index or label) pending, active, done, failed or skipped."""
        plan = self._output.plan
        labels, full = [s.label for s in plan], len(plan) >= MAX_PLAN_STEPS
        index = handover.step_index(labels, repaired(step) if isinstance(step, str) else step, full)
        note = handover.text("turn.mark", "note", note, optional=True)
        note = note and repaired(note)[:500]
        label = labels[index] if index is not None else ""
        marked = handover.checked("turn.mark", PlanStep, label=label, state=state, note=note)
        if index is None:
            return  # a step beyond the 20-step cap
        plan[index] = marked
        self._replay.show(self._write_progress)

    def say(self, text: str) -> None:
        """Step text: what the agent is doing now, in words a person can read. Never tool details."""
        self._output.note = handover.text("turn.say", "text", text)
        self._replay.show(self._write_progress)

    def show(self, component: str, props: dict[str, Any], title: str | None = None) -> None:
        """Show a component (`table`, `keyvalue`, `timeline` or a registered kind) on the turn's status
        messages from now on: the working status (at once) and the question, connection or approval it asks
        next. It is a view of the work, not a result: a result goes in `reply(...)` or `artifact(...)` as a
        `Component`. A later `show` with the same kind and title replaces it. Never tool calls, arguments or
        results (Profile v2). `code-ref` is built only by `code_ref(...)`."""
        handover.text("turn.show", "component", component), handover.text("turn.show", "title", title, optional=True)
        parts = self._component_parts(Component(component, props, title))
        if not parts:
            return
        self._output.shown[(component, title)] = parts
        self._replay.show(self._write_progress)

    def _component_parts(self, component: Component) -> list[Part]:
        try:
            return COMPONENTS.parts(component)  # repaired where the message or artifact is made
        except InvalidComponent as invalid:
            if self._strict:
                raise
            if not self._replay.replaying:  # a rerun drops it again: logged and counted once, where it was new
                logger.warning("component dropped", extra={"component": component.component, "reason": str(invalid)})
                metrics.add_metric(name="ComponentDropped", unit=MetricUnit.Count, value=1)
            return []

    def _parts(self, parts: tuple[Part | str | Component, ...]) -> list[Part]:
        out: list[Part] = []
        for part in parts:
            if isinstance(part, Component):
                out += self._component_parts(part)
            else:
                out.append(Part(text=part) if isinstance(part, str) else part)
        return out

    def _write_progress(self) -> None:
        plan = self._output.plan
        message = progress_message(
            self.task_id, self.context_id, self._output.note or "Working", plan, self._output.view
        )
        self._store.set_status(
            self.task_id, TaskStatus(state=TaskState.WORKING, message=message), expect={TaskState.WORKING}, plan=plan
        )

    # ------------------------------------------------------------------ effects
    def effect(
        self,
        name: str,
        fn: EffectFunction,
        *,
        idempotent: bool = False,
        reconcile: Callable[[str], Any] | None = None,
    ) -> Any:
        """Run a named side effect once, ever. `fn(key)` gets a stable idempotency key for this effect.

        `idempotent=True`: if a run died mid-effect, run it again with the same key (the callee dedupes).
        `reconcile(key)`: if a run died mid-effect, ask the outside world what happened; return the result,
        or None when it cannot tell (then the outcome is reported uncertain).
        """
        return self._replay.effect(handover.text("turn.effect", "name", name), fn, idempotent=idempotent, reconcile=reconcile)

    # ------------------------------------------------------------------ interactions
    def approval(self, prompt: str, detail: dict[str, Any] | None = None) -> bool:
        """Ask a person to approve. Profile v2: AUTH_REQUIRED; only an interactions/v1 answer approves."""
        return bool(self._ask("approval", prompt, detail)["approved"])

    def question(self, prompt: str, detail: dict[str, Any] | None = None) -> Any:
        """Ask the caller a question (INPUT_REQUIRED); returns the answer's value."""
        return self._ask("question", prompt, detail)["value"]

    def connection(self, name: str, *, scopes: Sequence[str] = (), prompt: str) -> Connection | Declined:
        """The person's account at provider `name` (docs/writing/connections.md): a `Connection` at once when connected
        with `scopes`, else after they connect (AUTH_REQUIRED, kind `connection`); `Declined` (falsy) if not."""
        handover.text("turn.connection", "name", name), [handover.text("turn.connection", "scope", s) for s in scopes]

        def ask(detail: dict[str, Any]) -> dict[str, Any]:
            assert self._connections is not None  # connect() refused a Runtime without providers
            url = authorization_url(self._connections, self.task_id, self._replay.next_id("ia"))
            return self._ask("connection", prompt, {**detail, "authorizationUrl": url})

        effect: Callable[[str, EffectFunction], Any] = lambda n, fn: self._replay.effect(n, fn, idempotent=True)
        return connect(self._connections, self._record.owner, effect, ask, name, scopes)

    def _ask(self, kind: InteractionKind, prompt: str, detail: dict[str, Any] | None) -> dict[str, Any]:
        method = f"turn.{kind}"
        prompt, detail = handover.text(method, "prompt", prompt), handover.detail(method, detail)
        answer = self._replay.ask(kind, repaired(prompt), repaired(detail))
        # progress/v1: since the question, the person has read it and the service's ANSWERED_TEXT; a `say()` from
        # before it (replayed on every rerun) is not shown again. Set on every run, so a rerun shows the same.
        self._output.note = ANSWERED_TEXT
        return answer

    # ------------------------------------------------------------------ delegation (docs/writing/delegation.md)
    def delegate(
        self,
        agent_url: str,
        message: str | Message | list[Part | str],
        *,
        credentials: Credentials = None,
    ) -> Delegated:
        """Hand work to another A2A 1.0 Agent (this Runtime's or any other) and wait for its task to end, without
        holding the turn function: a delegate that works for days costs nothing meanwhile. What it asks a person
        (a question, a connection, an approval) the caller is asked as this turn's own interaction, and the
        typed answer goes back to it. Returns what the delegate's task came to (`Delegated`), for this code only:
        Profile v2 shows a caller no delegation, so copy into the reply what the caller should read.
        `credentials`: a bearer token, or the headers to send (the delegate's caller is this Agent, not the
        person). Sent once: a rerun replays the delegate's answers (engine/delegation.py)."""
        if self._delegation is None:
            raise RuntimeError("this Runtime cannot delegate (no A2A client wired)")
        step = Delegation(self._delegation, self._replay, self.task_id, self._ask, self.usage, self._record.owner.subject)
        return step.run(agent_url, message, credentials)

    # ------------------------------------------------------------------ usage, artifacts, reply
    def usage(self, tokens: int = 0, cost_usd: float = 0.0) -> None:
        """Report model usage; totals reach telemetry/v1 and the usage event (counted once per report)."""
        self._replay.usage(*handover.usage(tokens, cost_usd))

    def artifact(
        self,
        *parts: Part | str | Component,
        name: str | None = None,
        artifact_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        extensions: list[str] | None = None,
    ) -> str:
        """Add (or, with the same `artifact_id`, replace) an artifact. Returns its id. A `Component` part
        becomes its text fallback and the component part (docs/components.md)."""
        if not parts:
            raise handover.BadTurnArgument("turn.artifact: give at least one part")
        artifact_parts = self._parts(handover.parts("turn.artifact", parts))
        name = handover.text("turn.artifact", "name", name, optional=True)
        artifact_id = artifact_id or str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.task_id}/{repaired(name) or len(parts)}"))
        handover.json_value("turn.artifact", "metadata", metadata)
        artifact = handover.checked(
            "turn.artifact", Artifact, artifact_id=artifact_id, name=name, parts=artifact_parts,
            metadata=metadata, extensions=extensions,
        ) if artifact_parts else None

        def put() -> None:
            if not artifact:  # deployed, its only part was an invalid component: dropped, nothing to show
                return
            self._store.put_artifact(self.task_id, repaired(artifact))

        self._replay.write_once(put)
        return artifact_id

    # ------------------------------------------------------------------ files (files/v1)
    @property
    def files(self) -> list[FileHandle]:
        """The caller's files in this turn's message (`raw` and `url` parts). A `url` file is fetched once
        (journaled); if it cannot be fetched, the turn fails with a status saying which file."""
        if self._inbound is None:
            files = self._require_files()
            owner, context_id, message_id = self._record.owner, self.context_id, self._message.message_id

            def fetch(index: int, part: Part, max_bytes: int) -> Any:
                return self.effect(
                    f"{FETCH_EFFECT}{index}",
                    lambda key: files.fetch(owner, context_id, message_id, index, part, max_bytes),
                    idempotent=True,
                )

            self._inbound = files.handles(self._message, fetch)
        return list(self._inbound)

    def write_file(
        self, path: str, data: bytes | str, *, kind: str = "file", media_type: str = "application/octet-stream"
    ) -> FileVersion:
        """Write a file at `path` in the agent's outputs (per context). Writing a path again makes a new
        version; the task's artifact for that path then shows the newest (files/v1: kind, version, size,
        sha256, path) with a fresh download URL on every read."""
        for argument, value in (("path", path), ("kind", kind), ("media_type", media_type)):
            handover.text("turn.write_file", argument, value)
        if not isinstance(data, (str, bytes, bytearray, memoryview)):
            raise handover.BadTurnArgument(f"turn.write_file: data must be bytes or a str, not {type(data).__name__}")
        try:
            path = clean_path(path)
        except ValueError as error:
            raise handover.BadTurnArgument(f"turn.write_file: {error}") from None
        files, body = self._require_files(), data.encode() if isinstance(data, str) else bytes(data)
        owner, context_id = self._record.owner, self.context_id
        store = self._store

        def write(key: str) -> dict[str, Any]:
            version = store.file_version(file_scope(owner, context_id), path, key)
            return {**files.write_output(owner, context_id, path, body, media_type, version), "version": version}

        written = self.effect(f"{WRITE_EFFECT}{path}", write, idempotent=True)
        version = int(written["version"])
        part = files.output_part(written, path, kind, media_type, version)
        info = FileVersion(kind=kind, version=version, size=int(written["size"]), sha256=str(written["sha256"]), path=path)
        metadata, extensions = with_extension(None, None, FILES, info)
        # One artifact per path: a new version replaces the previous one's content (same artifact id).
        self.artifact(
            part,
            name=posixpath.basename(path),
            artifact_id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.task_id}/file/{path}")),
            metadata=metadata,
            extensions=extensions,
        )
        return info

    def _require_files(self) -> FileService:
        if self._files is None:
            raise RuntimeError("this Runtime has no file store (NYLORUN_FILES_BUCKET)")
        return self._files

    def reply(self, *parts: Part | str | Component) -> None:
        """The agent's answer: the turn completes with this message once the turn function returns. A
        `Component` part becomes its text fallback and the component part (docs/components.md)."""
        parts = handover.parts("turn.reply", parts)
        self._output.reply = agent_message(self.task_id, self.context_id, self._parts(parts) or [Part(text="Done.")])

    def reject(self, text: str) -> None:
        """End the turn as REJECTED (the agent will not do this)."""
        text = handover.text("turn.reject", "text", text)
        self._output.reply = agent_message(self.task_id, self.context_id, [Part(text=text)])
        self._output.rejected = True
        raise Finished()


__all__ = [
    "Connection",
    "Declined",
    "Delegated",
    "Finished",
    "Interrupted",
    "NonDeterministicAgent",
    "OutcomeLost",
    "Turn",
    "TurnCanceled",
    "TurnFailed",
    "TurnOutput",
]
