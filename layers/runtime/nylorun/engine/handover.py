"""What an Agent hands its Turn, checked where it is handed over by the models that read it back.

A value the store could keep but no read could decode (a plan step in state "completed", a part with two
contents, metadata that is no JSON) would fail every later read of the task. So it never gets that far: it is a
`BadTurnArgument` raised in the Agent's code, naming the Turn method, the argument and what is allowed. The runner
treats it as any error of the Agent's code (engine/runner.py: logged, the turn fails with the generic text).

The checks depend only on the arguments, so a rerun of the Agent (engine/replay.py) meets the same error at the
same call. A message never echoes a refused value (it may hold a caller's data), only a refused choice among
fixed ones (a step state).
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from nylorun.profile.components import Component
from nylorun.protocol.models import Part

M = TypeVar("M", bound=BaseModel)


class BadTurnArgument(ValueError, TypeError):
    """A value a Turn method refuses: the message names the method, the argument and what is allowed."""


def checked(method: str, model: type[M], argument: str = "", **fields: Any) -> M:
    """`model` made of `fields`, or BadTurnArgument saying which field (of `argument`, when given) is wrong."""
    try:
        return model.model_validate(fields)
    except ValidationError as error:
        raise BadTurnArgument(f"{method}: {_described(error, argument)}") from None


def _described(error: ValidationError, argument: str) -> str:
    first = error.errors(include_url=False)[0]
    where = ".".join([argument] * bool(argument) + [str(p) for p in first["loc"]]) or "value"
    if first["type"] == "literal_error":
        allowed = str(first.get("ctx", {}).get("expected", "")).replace("'", "").replace(" or ", ", ")
        return f"{where} {str(first['input'])[:40]!r} is not one of {allowed}"
    reason = str(first["msg"]).removeprefix("Value error, ")
    return f"{where}: {reason[0].lower()}{reason[1:]}"


def json_value(method: str, argument: str, value: Any) -> Any:
    """`value` when it is JSON as the store keeps it (journaled, or on the wire: no NaN, no infinity)."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise BadTurnArgument(f"{method}: {argument} must be JSON-serialisable ({error})") from None
    return value


def text(method: str, argument: str, value: Any, *, optional: bool = False) -> Any:
    """`value` when it is a str (or None, when `optional`)."""
    if isinstance(value, str) or (optional and value is None):
        return value
    wanted = "a str or None" if optional else "a str"
    raise BadTurnArgument(f"{method}: {argument} must be {wanted}, not {type(value).__name__}")


def detail(method: str, value: Any) -> dict[str, Any] | None:
    """An interaction's `detail`: None or a JSON object (interactions/v1 carries it as one)."""
    if value is not None and not isinstance(value, dict):
        raise BadTurnArgument(f"{method}: detail must be a dict or None, not {type(value).__name__}")
    return json_value(method, "detail", value)  # type: ignore[no-any-return]


def parts(method: str, given: tuple[Any, ...]) -> tuple[Part | str | Component, ...]:
    """Each part a str, a Component, or a `Part` that validates as the store reads it back."""
    for index, part in enumerate(given):
        if isinstance(part, Part):
            data = part.model_dump(by_alias=True, exclude_none=True, warnings=False)
            checked(method, Part, f"part {index}", **data)
            json_value(method, f"part {index} (its data and metadata)", data)
        elif not isinstance(part, (str, Component)):
            raise BadTurnArgument(f"{method}: part {index} must be a str, Part or Component, not {type(part).__name__}")
    return given


def usage(tokens: Any, cost_usd: Any) -> tuple[int, float]:
    """A usage report: a whole number of tokens and a finite cost, neither negative (telemetry/v1 sums them)."""
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise BadTurnArgument(f"turn.usage: tokens must be an int of 0 or more, not {_shown(tokens)}")
    if isinstance(cost_usd, bool) or not isinstance(cost_usd, (int, float)) or not 0 <= cost_usd < float("inf"):
        raise BadTurnArgument(f"turn.usage: cost_usd must be a finite number of 0 or more, not {_shown(cost_usd)}")
    return tokens, float(cost_usd)


def _shown(value: Any) -> str:
    """A refused number as it may be shown (a count or a cost, never a caller's data); other values by type."""
    return repr(value) if isinstance(value, (int, float)) else type(value).__name__


def step_index(labels: list[str], step: Any, full: bool) -> int | None:
    """The plan step `turn.mark` names (by index or label). None for a step the 20-step cap dropped (Profile v2,
    progress/v1: a long plan never fails a turn), which only a full plan (`full`) can have had."""
    if isinstance(step, str) and step in labels:
        return labels.index(step)
    if isinstance(step, int) and not isinstance(step, bool) and 0 <= step < len(labels):
        return step
    if isinstance(step, str) or (isinstance(step, int) and not isinstance(step, bool) and step >= 0):
        if full:
            return None
        steps = f"the plan has steps 0 to {len(labels) - 1}" if labels else "there is no plan yet (turn.plan)"
        shown = repr(step[:40]) if isinstance(step, str) else step
        raise BadTurnArgument(f"turn.mark: step {shown} is not a step of the plan: {steps}")
    raise BadTurnArgument(f"turn.mark: step must be an int of 0 or more or a step's label, not {_shown(step)}")


__all__ = ["BadTurnArgument", "checked", "detail", "json_value", "parts", "step_index", "text", "usage"]
