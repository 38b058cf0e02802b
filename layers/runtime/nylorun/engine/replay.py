"""Replay: the journal cursor that makes a turn durable (docs/writing/index.md#how-a-turn-survives).

Every run of the turn function runs the agent from the top. Each effect, interaction and usage report takes
the next position (`seq`) in the turn's journal:

* an effect journaled *finished* returns its journaled result instead of running again;
* an effect journaled *started* but never *finished* is an outcome that was lost: it is not run again
  (unless declared idempotent, then it runs again with the same idempotency key, or a `reconcile` finds the
  result); the turn stops with `OutcomeLost` and the task stays WORKING with `effects/v1` `uncertain`;
* an interaction with a journaled answer returns that answer; one without stops the turn (`Interrupted`);
* a usage report journaled already is not journaled (counted) again;
* a wait (for a delegate's task) without an entry stops the turn (`Waiting`); with one, the run is its
  wake-up and goes on;
* an operation of another kind or name than the journal holds at its position is `NonDeterministicAgent`.

What a caller sees is written only once replay has caught up with the journal, so a rerun never shows an
older plan than the one already shown: a status write made while replaying is held back (only the latest
counts) and made when the agent reaches new ground; an artifact write made while replaying is skipped (the
run that journaled past this point already made it).

`Replay` knows the journal and the store's journal calls, nothing of what an agent shows: the `Turn`
(engine/turn.py) hands it the writes to make or hold back.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from nylorun.engine.handover import json_value
from nylorun.ports import JournalEntry, JournalKind, TaskStore
from nylorun.profile.extensions import Interaction, InteractionKind

EffectFunction = Callable[[str], Any]
Write = Callable[[], object]


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

    def __init__(self, effect_id: str, seq: int) -> None:
        super().__init__(effect_id)
        self.effect_id = effect_id
        self.seq = seq  # its place in the journal (an operator resolves it there: `nylorun admin resolve`)


class Waiting(BaseException):
    """The turn waits for something outside (a delegate's task): it stops here, the task stays WORKING,
    and it runs again when woken (the delegate's callback) or when the wait times out (a poll)."""

    def __init__(self, seq: int, wait_id: str) -> None:
        super().__init__(wait_id)
        self.seq = seq
        self.wait_id = wait_id


class NonDeterministicAgent(Exception):
    """On replay the agent asked for a different operation than the journal holds at that position."""


def opaque_id(task_id: str, seq: int, prefix: str) -> str:
    """The id of the operation at `seq`. Opaque: a caller never learns an effect's name (Profile v2 shows
    steps, never tool calls). Deterministic, so a rerun names the same operation the same way."""
    return f"{prefix}-{hashlib.sha256(f'{task_id}#{seq}'.encode()).hexdigest()[:16]}"


class Replay:
    """The journal cursor of one run of one turn."""

    def __init__(self, store: TaskStore, task_id: str, journal: dict[int, JournalEntry]) -> None:
        self._store = store
        self._task_id = task_id
        self._journal = journal
        self._last_journaled = max(journal, default=0)
        self._seq = 0
        self._held: Write | None = None

    @property
    def replaying(self) -> bool:
        """True while the agent is still before the last position an earlier run journaled."""
        return self._seq < self._last_journaled

    @property
    def journal(self) -> Mapping[int, JournalEntry]:
        """The journal as this run knows it: what it read at the start and every entry it finished or wrote since
        (an effect is known once finished; one whose function raised is not, and counts for nothing)."""
        return MappingProxyType(self._journal)

    @property
    def waits(self) -> int:
        """How many waits the agent has reached so far in this turn (each a park of its Step Functions execution)."""
        return sum(1 for seq, entry in self._journal.items() if entry.kind == "wait" and seq <= self._seq)

    def next_id(self, prefix: str) -> str:
        """The id the next journaled operation will have: an interaction's, for a URL that names it in its detail."""
        return opaque_id(self._task_id, self._seq + 1, prefix)

    # ------------------------------------------------------------------ caller-visible writes
    def show(self, write: Write) -> None:
        """A status write: made now, or while replaying held back (the latest replaces any held one) until
        the agent reaches new ground."""
        self._held = write
        if not self.replaying:
            self._catch_up()

    def write_once(self, write: Write) -> None:
        """A write an earlier run already made when replaying (an artifact): made only past the journal."""
        if not self.replaying:
            write()

    # ------------------------------------------------------------------ journaled operations
    def effect(
        self,
        name: str,
        fn: EffectFunction,
        *,
        idempotent: bool = False,
        reconcile: Callable[[str], Any] | None = None,
    ) -> Any:
        """Run `fn(key)` once, ever, at the next position; see the module docstring for a lost outcome."""
        seq = self._next()
        key = opaque_id(self._task_id, seq, "eff")
        entry = self._journal.get(seq)
        if entry is not None:
            _check(entry, "effect", name)
            if entry.finished:
                return entry.result
            # Started, never finished: the outcome was lost.
            if idempotent:
                return self._finish(seq, name, fn(key))
            if reconcile is not None:
                found = reconcile(key)
                if found is not None:
                    return self._finish(seq, name, found)
            raise OutcomeLost(key, seq)
        self._catch_up()
        # The started entry is written (conditionally on the task not being canceled) before the effect runs.
        self._store.journal_start(self._task_id, JournalEntry(seq=seq, kind="effect", name=name))
        return self._finish(seq, name, fn(key))

    def ask(self, kind: InteractionKind, prompt: str, detail: dict[str, Any] | None) -> dict[str, Any]:
        """The journaled answer to the interaction at the next position, or `Interrupted` until there is one."""
        seq = self._next()
        entry = self._journal.get(seq)
        interaction = Interaction(
            interaction_id=opaque_id(self._task_id, seq, "ia"), kind=kind, prompt=prompt, detail=detail
        )
        if entry is not None:
            _check(entry, "interaction", kind)
            if entry.answer is not None:
                return dict(entry.answer)
            raise Interrupted(seq, interaction)
        self._catch_up()
        self._store.journal_start(self._task_id, JournalEntry(seq=seq, kind="interaction", name=kind))
        raise Interrupted(seq, interaction)

    def wait(self, name: str) -> None:
        """Wait at the next position until woken: a new wait stops the turn (`Waiting`); a wait an earlier run
        started returns, since this run is its wake-up (woken, a poll, or a retry: all look again)."""
        seq = self._next()
        entry = self._journal.get(seq)
        if entry is not None:
            _check(entry, "wait", name)
            if not entry.finished:
                self._finish(seq, name, {"woken": "rerun"}, kind="wait")
            return
        self._catch_up()
        self._store.journal_start(self._task_id, JournalEntry(seq=seq, kind="wait", name=name))
        raise Waiting(seq, opaque_id(self._task_id, seq, "wait"))

    def usage(self, tokens: int, cost_usd: float) -> None:
        """Journal a usage report at the next position (finished at once), unless an earlier run did."""
        seq = self._next()
        if seq in self._journal:
            _check(self._journal[seq], "usage", "usage")
            return
        self._catch_up()
        entry = JournalEntry(
            seq=seq, kind="usage", name="usage", finished=True, result={"tokens": int(tokens), "costUsd": float(cost_usd)}
        )
        self._store.journal_start(self._task_id, entry)
        self._journal[seq] = entry

    # ------------------------------------------------------------------ internals
    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def _catch_up(self) -> None:
        """Replay has reached new ground: make the held status write (the latest plan and step text)."""
        write, self._held = self._held, None
        if write is not None:
            write()

    def _finish(self, seq: int, name: str, result: Any, kind: JournalKind = "effect") -> Any:
        # The result is journaled as JSON and handed back as its round trip on every rerun: one that is no JSON
        # is refused here, where the effect returned, before the journal holds it.
        json_value("turn.effect", f"the result of effect {name!r}", result)
        self._store.journal_finish(self._task_id, seq, result)
        self._journal[seq] = JournalEntry(seq=seq, kind=kind, name=name, finished=True, result=result)
        return result


def _check(entry: JournalEntry, kind: JournalKind, name: str) -> None:
    if entry.kind != kind or (entry.name and entry.name != name):
        raise NonDeterministicAgent(
            f"position {entry.seq}: journal has {entry.kind} {entry.name!r}, agent asked {kind} {name!r}"
        )


__all__ = ["EffectFunction", "Interrupted", "NonDeterministicAgent", "OutcomeLost", "Replay", "Waiting", "opaque_id"]
