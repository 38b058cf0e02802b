"""A Python client for any A2A 1.0 Agent, with typed access to what Nylorun Profile v2 carries.

    async with NylorunClient(url, token=token) as client:
        task = await client.send("I want a refund")
        if isinstance(task, TaskView) and task.interaction and task.interaction.kind == "question":
            task = await client.answer(task.id, "A-1001")

Built on the a2a-sdk client (`pip install 'nylorun-runtime-aws[client]'`); `nylorun send` and friends
(`nylorun_client.cli`) are its command line.
"""

from nylorun.profile.extensions import FileVersion, Interaction, PlanStep, Telemetry

from nylorun_client.client import PROFILE_V2, ClientError, NoOpenInteraction, NylorunClient
from nylorun_client.views import ArtifactView, MessageView, TaskView, task_view

__all__ = [
    "PROFILE_V2",
    "ArtifactView",
    "ClientError",
    "FileVersion",
    "Interaction",
    "MessageView",
    "NoOpenInteraction",
    "NylorunClient",
    "PlanStep",
    "TaskView",
    "Telemetry",
    "task_view",
]
