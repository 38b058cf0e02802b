"""The sentences that tell a person what to do next about a task: it still waits, or its pushes go somewhere."""

from __future__ import annotations

from nylorun_client.views import TaskView


def waiting_message(task: TaskView) -> str:
    if task.uncertain and not task.interrupted:
        return (
            f"Task {task.id} stays WORKING: the outcome of effect {task.uncertain} was lost. Check it in the "
            "system it changed, then cancel the task (`nylorun cancel`) or rerun the turn."
        )
    return (
        f"Task {task.id} still waits ({task.short_state}): see it with `nylorun get`, answer it with "
        "`nylorun approve` or `nylorun answer`."
    )


def push_note(task: TaskView, push_url: str, agent_url: str) -> str:
    return (
        f"Push: task {task.id}'s updates are POSTed to {push_url}; receive and verify them there with "
        f"`nylorun webhooks --from {agent_url}`."
    )
