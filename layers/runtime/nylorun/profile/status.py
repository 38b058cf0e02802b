"""Status messages, rendered: the texts the Runtime itself writes (not an Agent's words) — queued turns,
interactions as a core-tier client reads them, lost outcomes — and the agent messages of a turn with the profile
data they carry (the plan under progress/v1, the open interaction under interactions/v1, effects/v1).

Decision: what an agent shows a caller is recorded as well-formed Unicode. A lone surrogate in its text, plan,
artifact or interaction (say, from bytes decoded with `surrogateescape`, or a model's output cut inside an
emoji) becomes U+FFFD (`protocol/text.py`, `repaired`) where the Turn takes it or a message is built here:
stored as it was, it would make every read of the task fail. Failing the turn instead would lose a reply over
one character.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from nylorun.profile.extensions import (
    EFFECTS,
    INTERACTIONS,
    PROGRESS,
    Interaction,
    PlanStep,
    Progress,
    with_extension,
)
from nylorun.protocol.models import Message, Part, Role, TaskState, TaskStatus
from nylorun.protocol.text import repaired

# effects/v1: the status text of a task whose step lost its outcome (the task stays WORKING).
UNCERTAIN_TEXT = (
    "A step's outcome was lost; it will not be repeated. An operator must reconcile it or cancel the task."
)
# The FAILED status of an uncertain task nobody resolved within the uncertainty deadline (docs/operate.md).
UNKNOWN_OUTCOME_TEXT = (
    "A step's outcome was lost and no operator resolved it in time: whether that step took effect is unknown. "
    "The task has ended."
)
# The WORKING status once an operator resolved the lost outcome and the turn resumes.
RESOLVED_TEXT = "An operator resolved the step whose outcome was lost; the task continues."
# The WORKING status once a person answered (progress/v1), until the Agent says something new.
ANSWERED_TEXT = "Answer received; continuing."


def queued_message(task_id: str, context_id: str, ahead_task_id: str) -> Message:
    """A task queued behind a busy context says what it waits for: the context's turn before it.
    The id is derived, so a retried write says the same thing with the same id."""
    return Message(
        message_id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{task_id}/queued")),
        role=Role.AGENT,
        parts=[
            Part(
                text=f"Queued: this context runs one task at a time; this task starts when task "
                f"{ahead_task_id} has ended."
            )
        ],
        task_id=task_id,
        context_id=context_id,
    )


def submitted_status(task_id: str, context_id: str, ahead_task_id: str | None, timestamp: str) -> TaskStatus:
    """A new task's status: SUBMITTED, and when it is queued (`ahead_task_id`), what it waits for."""
    message = queued_message(task_id, context_id, ahead_task_id) if ahead_task_id else None
    return TaskStatus(state=TaskState.SUBMITTED, message=message, timestamp=timestamp)


def core_text(interaction: Interaction) -> str:
    """How an interaction reads to a core-tier client (no extension activated)."""
    if interaction.kind == "approval":
        return (
            f"Approval needed: {interaction.prompt} "
            "Only an interactions/v1 answer approves; a text reply does not."
        )
    if interaction.kind == "connection":
        detail = interaction.detail or {}
        name, url = detail.get("connection", "an account"), detail.get("authorizationUrl")
        # Profile v2: a core-tier caller sees the prompt and where to connect as text (the URL is no secret: the
        # page it opens names the subject and the Agent before the provider's consent page).
        opening = f" To connect, open {url}" if url else ""
        return f"Connection needed ({name}): {interaction.prompt}{opening}"
    return interaction.prompt


def text_does_not_approve(interaction: Interaction) -> str:
    """The status text after a caller answered an approval with text: it stays open, and this says why."""
    return (
        f"{core_text(interaction)} Your text reply was recorded; it does not answer this {interaction.kind}. "
        f"Answer with interactions/v1 metadata {{interactionId: {interaction.interaction_id}, approved}}."
    )


# ---------------------------------------------------------------- an agent's messages on its turn
def agent_message(task_id: str, context_id: str, parts: Sequence[Part]) -> Message:
    """A message from the agent on its task (a fresh id), its parts repaired to well-formed Unicode."""
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.AGENT,
        parts=[repaired(part) for part in parts],
        task_id=task_id,
        context_id=context_id,
    )


def with_plan(message: Message, plan: Sequence[PlanStep]) -> Message:
    """Attach the plan under progress/v1 (when there is one)."""
    if not plan:
        return message
    metadata, extensions = with_extension(message.metadata, message.extensions, PROGRESS, Progress(steps=list(plan)))
    return message.model_copy(update={"metadata": metadata, "extensions": extensions})


def progress_message(
    task_id: str, context_id: str, text: str, plan: Sequence[PlanStep], view: Sequence[Part] = ()
) -> Message:
    """A WORKING status message: the step text, the components the turn shows (`view`: `turn.show`, each with
    its text fallback; docs/components.md), and the plan under progress/v1."""
    return with_plan(agent_message(task_id, context_id, [Part(text=text), *view]), plan)


def interaction_message(
    task_id: str, context_id: str, interaction: Interaction, plan: Sequence[PlanStep], view: Sequence[Part] = ()
) -> Message:
    """The status message of an interrupted turn: a text question every tier can read, and the typed
    interaction under interactions/v1 (Profile v2: the core tier gets the text, typed clients both), with the
    components in view (say, the order an approval is about)."""
    message = progress_message(task_id, context_id, core_text(interaction), plan, view)
    metadata, extensions = with_extension(message.metadata, message.extensions, INTERACTIONS, interaction)
    return message.model_copy(update={"metadata": metadata, "extensions": extensions})


def uncertain_message(
    task_id: str, context_id: str, effect_id: str, plan: Sequence[PlanStep], view: Sequence[Part] = ()
) -> Message:
    """The status message of a turn whose effect lost its outcome: effects/v1 `{"uncertain": effectId}`."""
    message = progress_message(task_id, context_id, UNCERTAIN_TEXT, plan, view)
    metadata, extensions = with_extension(message.metadata, message.extensions, EFFECTS, {"uncertain": effect_id})
    return message.model_copy(update={"metadata": metadata, "extensions": extensions})
