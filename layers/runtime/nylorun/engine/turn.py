"""The `Turn` an agent's code receives, and the replay that makes a turn durable.

Every run of the turn function runs the agent from the top. Each effect, interaction and usage report takes
the next position (`seq`) in the turn's journal:

* an effect journaled *finished* returns its journaled result instead of running again;
* an effect journaled *started* but never *finished* is an outcome that was lost: it is not run again
  (unless declared idempotent, then it runs again with the same idempotency key); the task stays WORKING
  with `effects/v1` `uncertain` (Profile v2: "A step whose outcome was lost");
* an interaction with a journaled answer returns that answer; one without stops the turn (interrupted).

What a caller sees (status text, plan, artifacts) is written only once replay has caught up with the
journal, so a rerun never shows an older plan than the one already shown.

Decision: what an agent shows a caller is recorded as well-formed Unicode. A lone surrogate in its text, plan,
artifact or interaction (say, from bytes decoded with `surrogateescape`, or a model's output cut inside an
emoji) becomes U+FFFD (`protocol/text.py`, `repaired`) where the Turn takes it: stored as it was, it would make
every read of the task fail. Failing the turn instead would lose a reply over one character.
"""

from __future__ import annotations

import hashlib
import posixpath
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from nylorun.domain.files import clean_path
from nylorun.domain.files import scope as file_scope
from nylorun.engine.files import FileHandle, FileService
from nylorun.observability import logger
from nylorun.ports import JournalEntry, TaskRecord, TaskStore, TurnCanceled
from nylorun.profile.extensions import (
    EFFECTS,
    FILES,
    INTERACTIONS,
    MAX_PLAN_STEPS,
    PROGRESS,
    FileVersion,
    Interaction,
    InteractionKind,
    PlanStep,
    Progress,
    StepState,
    with_extension,
)
from nylorun.profile.status import UNCERTAIN_TEXT, core_text
from nylorun.protocol.models import Artifact, Message, Part, Role, TaskState, TaskStatus
from nylorun.protocol.text import repaired

EffectFunction = Callable[[str], Any]


# The signals that stop a turn derive from BaseException, not Exception: an agent's own `except Exception:`
# around `turn.approval()` (or an effect) must not swallow a wait for a person or a lost outcome.


class Interrupted(BaseException):
    """The agent asked something that has no answer yet: the turn stops here until the caller answers."""

    def __init__(self, seq: int, interaction: Interaction) -> None:
        super().__init__(interaction.kind)
        self.seq = seq
        self.interaction = interaction


class OutcomeLost(BaseException):
    """An effect started and never finished, and cannot safely run again."""

    def __init__(self, effect_id: str) -> None:
        super().__init__(effect_id)
        self.effect_id = effect_id


class Finished(BaseException):
    """`turn.reject()` ends the turn early."""


class NonDeterministicAgent(Exception):
    """On replay the agent asked for a different operation than the journal holds at that position."""


def _opaque(task_id: str, seq: int, prefix: str) -> str:
    # Effect and interaction ids are opaque: a caller must never learn an effect's name (Profile v2:
    # never tool calls). Deterministic, so a rerun names the same operation the same way.
    return f"{prefix}-{hashlib.sha256(f'{task_id}#{seq}'.encode()).hexdigest()[:16]}"


class Turn:
    """What an agent's turn function works with. See the README's "Writing an Agent"."""

    def __init__(
        self,
        store: TaskStore,
        record: TaskRecord,
        journal: dict[int, JournalEntry],
        files: FileService | None = None,
    ) -> None:
        self._store = store
        self._files = files
        self._inbound: list[FileHandle] | None = None
        self._record = record
        self._journal = journal
        self._last_journaled = max(journal, default=0)
        self._seq = 0
        self._plan: list[PlanStep] = list(record.plan)
        self._note: str | None = None
        self._dirty = False
        self._reply: Message | None = None
        self.rejected = False
        first_user = next((m for m in record.history if m.role == Role.USER), None)
        assert first_user is not None, "a turn always starts from a caller's message"
        self.message: Message = first_user

    # ------------------------------------------------------------------ what the agent reads
    @property
    def task_id(self) -> str:
        return self._record.task_id

    @property
    def context_id(self) -> str:
        return self._record.context_id

    @property
    def subject(self) -> str:
        """Who the caller acts for (Profile v2): the subject it authenticated as."""
        return self._record.owner.subject

    @property
    def text(self) -> str:
        return self.message.text()

    @property
    def history(self) -> list[Message]:
        return list(self._record.history)

    @property
    def replaying(self) -> bool:
        return self._seq < self._last_journaled

    # ------------------------------------------------------------------ progress (caller-visible)
    def plan(self, *labels: str) -> None:
        """Set the plan (progress/v1), all steps pending. Profile v2 caps a plan at 20 steps: the rest are
        dropped (and logged), so a long plan never fails a turn."""
        if len(labels) > MAX_PLAN_STEPS:
            logger.warning("plan capped", extra={"steps": len(labels), "cap": MAX_PLAN_STEPS})
        self._plan = [PlanStep(label=repaired(label)[:200]) for label in labels[:MAX_PLAN_STEPS]]
        self._show()

    def mark(self, step: int | str, state: StepState, note: str | None = None) -> None:
        """Mark one plan step (by index or label) pending, active, done, failed or skipped."""
        index = step if isinstance(step, int) else [s.label for s in self._plan].index(repaired(step))
        if not 0 <= index < len(self._plan):
            return  # a step beyond the 20-step cap
        note = note and repaired(note)[:500]
        self._plan[index] = self._plan[index].model_copy(update={"state": state, "note": note})
        self._show()

    def say(self, text: str) -> None:
        """Step text: what the agent is doing now, in words a person can read. Never tool details."""
        self._note = text
        self._show()

    def _show(self) -> None:
        self._dirty = True
        if not self.replaying:
            self._flush()

    def _flush(self) -> None:
        if not self._dirty:
            return
        self._dirty = False
        message = self._agent_message(self._note or "Working", progress=True)
        self._store.set_status(
            self.task_id,
            _status(TaskState.WORKING, message),
            expect={TaskState.WORKING},
            plan=self._plan,
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
        seq = self._next()
        key = _opaque(self.task_id, seq, "eff")
        entry = self._journal.get(seq)
        if entry is not None:
            self._check(entry, "effect", name)
            if entry.finished:
                return entry.result
            # Started, never finished: the outcome was lost.
            if idempotent:
                return self._finish(seq, name, fn(key))
            if reconcile is not None:
                found = reconcile(key)
                if found is not None:
                    return self._finish(seq, name, found)
            raise OutcomeLost(key)
        self._catch_up()
        # The started entry is written (conditionally on the task not being canceled) before the effect runs.
        self._store.journal_start(self.task_id, JournalEntry(seq=seq, kind="effect", name=name))
        return self._finish(seq, name, fn(key))

    def _finish(self, seq: int, name: str, result: Any) -> Any:
        self._store.journal_finish(self.task_id, seq, result)
        self._journal[seq] = JournalEntry(seq=seq, kind="effect", name=name, finished=True, result=result)
        return result

    # ------------------------------------------------------------------ interactions
    def approval(self, prompt: str, detail: dict[str, Any] | None = None) -> bool:
        """Ask a person to approve. Profile v2: AUTH_REQUIRED; only an interactions/v1 answer approves."""
        return bool(self._ask("approval", prompt, detail)["approved"])

    def question(self, prompt: str, detail: dict[str, Any] | None = None) -> Any:
        """Ask the caller a question (INPUT_REQUIRED); returns the answer's value."""
        return self._ask("question", prompt, detail)["value"]

    def connection(self, name: str, prompt: str, detail: dict[str, Any] | None = None) -> bool:
        """Ask the caller to connect an account (AUTH_REQUIRED, kind `connection`); True once connected."""
        return bool(self._ask("connection", prompt, {"connection": name, **(detail or {})})["approved"])

    def _ask(self, kind: InteractionKind, prompt: str, detail: dict[str, Any] | None) -> dict[str, Any]:
        seq = self._next()
        entry = self._journal.get(seq)
        interaction = Interaction(
            interaction_id=_opaque(self.task_id, seq, "ia"),
            kind=kind,
            prompt=repaired(prompt),
            detail=repaired(detail),
        )
        if entry is not None:
            self._check(entry, "interaction", kind)
            if entry.answer is not None:
                return dict(entry.answer)
            raise Interrupted(seq, interaction)
        self._catch_up()
        self._store.journal_start(self.task_id, JournalEntry(seq=seq, kind="interaction", name=kind))
        raise Interrupted(seq, interaction)

    # ------------------------------------------------------------------ usage, artifacts, reply
    def usage(self, tokens: int = 0, cost_usd: float = 0.0) -> None:
        """Report model usage; totals reach telemetry/v1 and the usage event (counted once per report)."""
        seq = self._next()
        if seq in self._journal:
            self._check(self._journal[seq], "usage", "usage")
            return
        self._catch_up()
        result = {"tokens": int(tokens), "costUsd": float(cost_usd)}
        self._store.journal_start(
            self.task_id, JournalEntry(seq=seq, kind="usage", name="usage", finished=True, result=result)
        )
        self._journal[seq] = JournalEntry(seq=seq, kind="usage", name="usage", finished=True, result=result)

    def artifact(
        self,
        *parts: Part | str,
        name: str | None = None,
        artifact_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        extensions: list[str] | None = None,
    ) -> str:
        """Add (or, with the same `artifact_id`, replace) an artifact. Returns its id."""
        artifact_id = artifact_id or str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.task_id}/{repaired(name) or len(parts)}"))
        if not self.replaying:
            artifact = Artifact(
                artifact_id=artifact_id,
                name=name,
                parts=[Part(text=p) if isinstance(p, str) else p for p in parts],
                metadata=metadata,
                extensions=extensions,
            )
            self._store.put_artifact(self.task_id, repaired(artifact))
        return artifact_id

    # ------------------------------------------------------------------ files (files/v1)
    @property
    def files(self) -> list[FileHandle]:
        """The caller's files in this turn's message (`raw` and `url` parts). A `url` file is fetched once
        (journaled); if it cannot be fetched, the turn fails with a status saying which file."""
        if self._inbound is None:
            files = self._require_files()
            owner, context_id, message_id = self._record.owner, self.context_id, self.message.message_id

            def fetch(index: int, part: Part) -> Any:
                return self.effect(
                    f"files.fetch.{index}", lambda key: files.fetch(owner, context_id, message_id, index, part),
                    idempotent=True,
                )

            self._inbound = files.handles(self.message, fetch)
        return list(self._inbound)

    def write_file(
        self, path: str, data: bytes | str, *, kind: str = "file", media_type: str = "application/octet-stream"
    ) -> FileVersion:
        """Write a file at `path` in the agent's outputs (per context). Writing a path again makes a new
        version; the task's artifact for that path then shows the newest (files/v1: kind, version, size,
        sha256, path) with a fresh download URL on every read."""
        files = self._require_files()
        path = clean_path(path)
        body = data.encode() if isinstance(data, str) else bytes(data)
        owner, context_id = self._record.owner, self.context_id
        store = self._store

        def write(key: str) -> dict[str, Any]:
            version = store.file_version(file_scope(owner, context_id), path, key)
            return {**files.write_output(owner, context_id, path, body, media_type, version), "version": version}

        written = self.effect(f"files.write.{path}", write, idempotent=True)
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

    def reply(self, *parts: Part | str) -> None:
        """The agent's answer: the turn completes with this message once the turn function returns."""
        self._reply = self._agent_message_parts([Part(text=p) if isinstance(p, str) else p for p in parts])

    def reject(self, text: str) -> None:
        """End the turn as REJECTED (the agent will not do this)."""
        self._reply = self._agent_message(text)
        self.rejected = True
        raise Finished()

    # ------------------------------------------------------------------ internals
    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def _catch_up(self) -> None:
        """Replay has reached new ground: show the caller the latest plan and step text."""
        self._flush()

    def _check(self, entry: JournalEntry, kind: str, name: str) -> None:
        if entry.kind != kind or (entry.name and entry.name != name):
            raise NonDeterministicAgent(
                f"position {entry.seq}: journal has {entry.kind} {entry.name!r}, agent asked {kind} {name!r}"
            )

    def _agent_message(self, text: str, *, progress: bool = False) -> Message:
        message = self._agent_message_parts([Part(text=text)])
        return self.with_plan(message) if progress else message

    def with_plan(self, message: Message) -> Message:
        """Attach the plan under progress/v1 (when there is one)."""
        if not self._plan:
            return message
        metadata, extensions = with_extension(message.metadata, message.extensions, PROGRESS, Progress(steps=self._plan))
        return message.model_copy(update={"metadata": metadata, "extensions": extensions})

    def _agent_message_parts(self, parts: Sequence[Part]) -> Message:
        return Message(
            message_id=str(uuid.uuid4()),
            role=Role.AGENT,
            parts=[repaired(part) for part in parts],
            task_id=self.task_id,
            context_id=self.context_id,
        )

    # used by the runner
    def outcome_message(self) -> Message | None:
        return self._reply

    def plan_steps(self) -> list[PlanStep]:
        return list(self._plan)

    def interaction_message(self, interrupted: Interrupted) -> Message:
        """The status message of an interrupted turn: a text question every tier can read, and the typed
        interaction under interactions/v1 (Profile v2: the core tier gets the text, typed clients both)."""
        interaction = interrupted.interaction
        message = self._agent_message(core_text(interaction), progress=True)
        metadata, extensions = with_extension(message.metadata, message.extensions, INTERACTIONS, interaction)
        return message.model_copy(update={"metadata": metadata, "extensions": extensions})

    def uncertain_message(self, effect_id: str) -> Message:
        message = self._agent_message(UNCERTAIN_TEXT, progress=True)
        metadata, extensions = with_extension(message.metadata, message.extensions, EFFECTS, {"uncertain": effect_id})
        return message.model_copy(update={"metadata": metadata, "extensions": extensions})


def _status(state: TaskState, message: Message | None) -> TaskStatus:
    return TaskStatus(state=state, message=message)


__all__ = ["Finished", "Interrupted", "NonDeterministicAgent", "OutcomeLost", "Turn", "TurnCanceled"]
