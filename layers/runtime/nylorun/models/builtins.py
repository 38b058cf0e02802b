"""Built-in tools an author may enable: the model asks the person a question, asks for a connection, keeps the
plan. None is offered unless the author lists it among the tools:

    converse(turn, model, tools=[find_order, ask_person, *keep_plan, ask_connection("payments")])

Each makes one turn operation, journaled as any other (a replay returns the journaled answer; the model is not
called again): `turn.question` (the turn waits INPUT_REQUIRED), `turn.connection` (AUTH_REQUIRED, kind
`connection`), `turn.plan`/`turn.mark` (progress/v1). Profile v2, "What is visible while working": the tool names
and the arguments the model sends never reach a caller; what the model writes *for the person* does, as its own
words: the question, the reason to connect, the plan's steps and notes (the descriptions tell the model so).
"""

from __future__ import annotations

from typing import Any, Literal

from nylorun.engine.turn import Turn
from nylorun.models.tools import Tool, _make
from nylorun.profile.extensions import StepState

# The model reads each tool's docstring (its description); the last sentence keeps tool talk out of what it shows.


def _ask_person(turn: Turn, question: str) -> dict[str, Any]:
    """Ask the person a question and wait for the answer; only when you cannot go on without it. The person
    reads the question as you write it: plain words, naming no tool."""
    # Profile v2, "What a client gets": the question's prompt is the model talking to the person, so it is
    # shown as the model wrote it (every tier reads it as text); the tool's name and call are not.
    return {"answer": turn.question(question)}


def _set_plan(turn: Turn, steps: list[str]) -> str:
    """Show the person the plan of your work: a short label per step (at most 20), all pending. The person
    reads the labels as you write them: plain words, naming no tool."""
    turn.plan(*steps)
    return "The plan is shown to the person, every step pending."


def _mark_step(turn: Turn, step: str, state: StepState, note: str | None = None) -> str:
    """Mark a step of the plan (its label exactly as you set it) active, done, failed or skipped, with an
    optional note. The person reads the note as you write it: plain words, naming no tool."""
    try:
        turn.mark(step, state, note)
    except ValueError:  # no step has that label: the model reads it and may set the plan first
        return f"There is no step {step!r} in the plan: use a label exactly as you set it."
    return f"Step {step!r} is {state}."


ask_person = _make(_ask_person, name="ask_person", on_turn=True)
keep_plan = (_make(_set_plan, name="set_plan", on_turn=True), _make(_mark_step, name="mark_step", on_turn=True))


def ask_connection(*names: str) -> Tool:
    """The tool that asks the person to connect one of the accounts `names` (the author's connection names:
    the model may ask for these only)."""
    if not names:
        raise ValueError("ask_connection: name the connections the model may ask for")

    def connect(turn: Turn, connection: str, reason: str) -> dict[str, Any]:
        return {"connected": bool(turn.connection(connection, prompt=reason))}

    connect.__doc__ = (
        f"Ask the person to connect an account ({', '.join(names)}) and wait until they have. The person reads"
        " `reason`, why you need it, as you write it: plain words, naming no tool."
    )
    connect.__annotations__["connection"] = Literal[names]  # pydantic refuses any name the author did not list
    return _make(connect, name="ask_connection", on_turn=True)
