"""Draw a task for a person: its state, step text and plan, its open interaction, and what it leaves."""

from __future__ import annotations

import json

from rich.console import Console, Group, RenderableType
from rich.progress_bar import ProgressBar
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from nylorun_client.draw import render_components
from nylorun_client.views import TaskView

STEP_ICONS = {
    "done": ("✓", "green"),
    "active": ("▶", "cyan"),
    "pending": ("·", "dim"),
    "failed": ("✗", "red"),
    "skipped": ("–", "dim"),
}
STATE_STYLES = {
    "COMPLETED": "bold green",
    "FAILED": "bold red",
    "REJECTED": "bold red",
    "CANCELED": "yellow",
    "INPUT_REQUIRED": "bold magenta",
    "AUTH_REQUIRED": "bold magenta",
}


def render_task(task: TaskView, *, working: bool = False) -> RenderableType:
    """State, step text and the plan (progress/v1) as a bar and a checklist."""
    header = Text.assemble(("Task ", "dim"), task.id, "  ", (task.short_state, state_style(task)))
    rows: list[RenderableType] = []
    if working and not task.terminal and not task.interrupted:
        grid = Table.grid(padding=(0, 1))
        grid.add_row(Spinner("dots", style="cyan"), header)
        rows.append(grid)
    else:
        rows.append(header)
    if task.text and not task.terminal and not task.interrupted:
        rows.append(Text(f"  {task.text}", style="italic"))
    if task.plan:
        finished = sum(step.state in ("done", "skipped") for step in task.plan)
        bar = Table.grid(padding=(0, 1))
        bar.add_row(
            Text("  Plan"),
            ProgressBar(total=len(task.plan), completed=finished, width=30),
            Text(f"{finished}/{len(task.plan)} steps"),
        )
        rows.append(bar)
        for step in task.plan:
            icon, style = STEP_ICONS.get(step.state, ("?", ""))
            line = Text.assemble(
                "    ", (icon, style), " ", (step.label, style if step.state != "pending" else "")
            )
            if step.note:
                line.append(f"  ({step.note})", style="dim")
            rows.append(line)
    if task.components and not task.terminal:
        rows.append(render_components(task.components))  # the view the turn shows (the reply's come at the end)
    if task.uncertain:
        rows.append(
            Text(
                f"  ⚠ The outcome of effect {task.uncertain} was lost: the task stays WORKING until an operator "
                "resolves it (the turn then goes on) or fails it, or the Runtime's deadline fails it.",
                style="yellow",
            )
        )
    return Group(*rows)


def render_interaction(task: TaskView) -> RenderableType:
    interaction = task.interaction
    if interaction is None:
        return Text(f"  {task.text}")
    titles = {"approval": "Approval needed", "question": "Question", "connection": "Connection needed"}
    title = titles.get(interaction.kind, interaction.kind)
    detail = interaction.detail or {}
    if interaction.kind == "connection" and "connection" in detail:
        title = f"{title}: {detail['connection']}"
    rows: list[RenderableType] = [Text.assemble((f"{title}: ", "bold magenta"), interaction.prompt)]
    for key, value in detail.items():
        if not (interaction.kind == "connection" and key == "connection"):
            rows.append(Text(f"  {key}: {value if isinstance(value, str) else json.dumps(value)}"))
    return Group(*rows)


def print_outcome(console: Console, task: TaskView) -> None:
    """What a finished (or shown) task leaves: the reply, the artifacts, the telemetry."""
    if task.text and (task.terminal or not task.interrupted):
        console.print(Text.assemble(("Reply: ", "bold"), task.text))
    if task.components and task.terminal:
        console.print(render_components(task.components))
    if task.artifacts:
        console.print(Text("Artifacts:", style="bold"))
    for artifact in task.artifacts:
        line = Text.assemble("  ", (artifact.name or artifact.artifact_id, "bold"))
        if artifact.file is not None:
            f = artifact.file
            line.append(
                f"  {f.kind} v{f.version} · {f.size} bytes · sha256 {f.sha256} · {f.path}", style="cyan"
            )
        console.print(line)
        for text_line in artifact.text.splitlines():
            console.print(Text(f"    {text_line}"))
        if artifact.components:
            console.print(render_components(artifact.components, indent=4))
        for url in artifact.urls:
            # Neither wrapped nor cropped: a download link must survive copy and paste.
            console.print(Text(f"    download: {url}"), soft_wrap=True)
    if task.telemetry is not None:
        t = task.telemetry
        totals = f"{_plural(t.steps, 'step')} · {_plural(t.tokens, 'token')} · ${t.cost_usd:.4f} · trace {t.trace_id}"
        console.print(Text.assemble(("Telemetry: ", "bold"), totals))


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def state_style(task: TaskView) -> str:
    """The colour a task's state is drawn in."""
    return STATE_STYLES.get(task.short_state, "bold cyan")
