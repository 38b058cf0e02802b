"""`tck`: the A2A TCK's scenario contract, chosen by the prefix of `message.messageId` (longest first)."""

from __future__ import annotations

import base64
import uuid

from nylorun.engine import Agent, Skill, Turn
from nylorun.protocol.models import Message, Part, Role

agent = Agent(
    name="tck",
    description="Plays the A2A Technology Compatibility Kit's scenarios, chosen by the messageId prefix.",
    skills=[
        Skill(
            id="tck",
            name="TCK scenarios",
            description="complete-task, input-required, message-response, artifact-*, reject-task; else echo.",
            tags=["conformance"],
        )
    ],
    input_modes=["text/plain", "application/json"],
    output_modes=["text/plain", "application/json"],
)

SCENARIOS = (
    "tck-complete-task",
    "tck-input-required",
    "tck-message-response",
    "tck-artifact-text",
    "tck-artifact-file-url",
    "tck-artifact-file",
    "tck-artifact-data",
    "tck-reject-task",
)


def scenario(message_id: str) -> str | None:
    matches = [s for s in SCENARIOS if message_id.startswith(s)]
    return max(matches, key=len) if matches else None


@agent.direct_reply
def direct(message: Message) -> Message | None:
    """`tck-message-response`: a direct Message, no task."""
    if message.task_id is None and scenario(message.message_id) == "tck-message-response":
        return Message(
            message_id=str(uuid.uuid4()),
            role=Role.AGENT,
            parts=[Part(text="Direct message response")],
            context_id=message.context_id,
        )
    return None


@agent.turn
def run(turn: Turn) -> None:
    # The TCK's contract holds for follow-ups too: a follow-up whose messageId starts with
    # `tck-input-required` asks again (its history tests send two), any other plays its own scenario.
    # The task's user messages are the first message, then the answer to each question, in order.
    messages = iter([m for m in turn.history if m.role == Role.USER])
    message = next(messages)
    while scenario(message.message_id) == "tck-input-required":
        turn.question("Please provide more input.")
        message = next(messages)  # answered: the answer is the next user message
    play(turn, message, follow_up=message is not turn.message)


def play(turn: Turn, message: Message, *, follow_up: bool) -> None:
    match scenario(message.message_id):
        case "tck-complete-task":
            turn.reply("Hello from TCK")
        case "tck-message-response":  # inside a task a Message cannot stand alone: the task completes with it
            turn.reply("Direct message response")
        case "tck-artifact-text":
            turn.artifact("Generated text content", name="text")
            turn.reply("Artifact generated")
        case "tck-artifact-file":
            raw = base64.b64encode(b"tck").decode()
            turn.artifact(Part(raw=raw, media_type="text/plain", filename="output.txt"), name="file")
            turn.reply("Artifact generated")
        case "tck-artifact-file-url":
            turn.artifact(
                Part(url="https://example.com/output.txt", media_type="text/plain", filename="output.txt"),
                name="file-url",
            )
            turn.reply("Artifact generated")
        case "tck-artifact-data":
            turn.artifact(Part(data={"key": "value", "count": 42}, media_type="application/json"), name="data")
            turn.reply("Artifact generated")
        case "tck-reject-task":
            turn.reject("Task rejected")
        case _ if follow_up:
            turn.reply(f"Input received: {message.text()}")
        case _:
            turn.reply(message.text() or "(no text)")
