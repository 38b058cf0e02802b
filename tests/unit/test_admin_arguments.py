"""`nylorun admin`'s arguments as an operator types them: where to act (`--local [PORT]`, `--stack NAME`, `--region`,
`--json`) before the command or after it (docs/operate.md). Parsing only: nothing is connected to."""

from __future__ import annotations

import argparse

import pytest
from nylorun_client.admin import with_local_port
from nylorun_client.command import build_parser, main


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(with_local_port(argv))


@pytest.mark.parametrize(
    "argv",
    [
        ("admin", "dlq", "--queue", "push", "--local", "18083"),
        ("admin", "dlq", "--local", "18083", "--queue", "push"),
    ],
)
def test_local_port_works_after_the_command(argv: tuple[str, ...]) -> None:
    # When the operator names the local Runtime's port after the command, before or after its options
    args = parse(*argv)
    # Then the command runs there, with its own options
    assert (args.admin_command, args.local, args.queue) == ("dlq", 18083, ["push"])


def test_local_without_a_port_after_the_command_is_the_default_port() -> None:
    # When the operator writes `--local` alone after the command
    args = parse("admin", "uncertain", "--local")
    # Then it is the default port
    assert (args.admin_command, args.local) == ("uncertain", 8080)


def test_stack_region_and_json_work_after_the_command() -> None:
    # When the operator puts --stack, --region and --json after the command
    args = parse("admin", "show", "task-1", "--stack", "nylorun-runtime-dev", "--region", "eu-west-1", "--json")
    # Then they are read as if written before it
    assert (args.task, args.stack, args.region, args.json) == ("task-1", "nylorun-runtime-dev", "eu-west-1", True)


def test_options_before_the_command_are_kept_beside_those_after_it() -> None:
    # When the port comes before the command and --json after it
    args = parse("admin", "--local", "18083", "connections", "--json")
    # Then both hold: the command's own parser does not reset the port
    assert (args.admin_command, args.local, args.json, args.stack) == ("connections", 18083, True, None)


def test_stack_and_local_together_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    # When the operator names a stack before the command and a local Runtime after it
    code = main(["admin", "--stack", "nylorun-runtime-dev", "dlq", "--local", "18083"])
    # Then it is a usage error saying to choose one, and nothing is connected to
    assert code == 2
    assert "choose --stack or --local, not both" in capsys.readouterr().err
