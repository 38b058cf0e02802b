"""`nylorun admin`: the operator's commands, against a deployed stack or a local Runtime.

    nylorun admin --stack NAME [--region R] COMMAND …   AWS credentials as boto3 finds them
    nylorun admin --local [PORT] COMMAND …              a `nylorun serve` on this machine (default port 8080)
    nylorun admin COMMAND … --local [PORT]              the same: --stack, --local, --region, --json go either side

The commands act on the stack's resources directly (the table, the state machine, the queues), with the
operator's own credentials: they see every subject's tasks, so they are for operators, never for callers
(docs/operate.md). Each action that changes something is recorded beside the task's journal with
the operator's identity (the IAM principal's ARN, or `local:<user>`), and logged. The arguments are in `parser`,
what every command acts on in `target`, and the commands themselves in `tasks` (uncertain, show, resolve, fail),
`queues` (dlq, redrive) and `connections` (counts).
"""

from nylorun_client.admin.parser import add_admin_command, with_local_port
from nylorun_client.admin.target import (
    DEFAULT_LOCAL_PORT,
    EXIT_ERROR,
    EXIT_OK,
    STACK_PARAMETERS,
    STACK_RESOURCES,
    AdminError,
    Target,
    connect,
    run_admin,
)

__all__ = [
    "DEFAULT_LOCAL_PORT",
    "EXIT_ERROR",
    "EXIT_OK",
    "STACK_PARAMETERS",
    "STACK_RESOURCES",
    "AdminError",
    "Target",
    "add_admin_command",
    "connect",
    "run_admin",
    "with_local_port",
]
