"""The quotas as deployed: each template parameter reaches the api function's settings under the name the code
reads, and the template's defaults are the code's (docs/security.md#quotas lists one set of defaults)."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
from nylorun.domain.quotas import Quotas
from nylorun.settings import Settings
from nylorun_local import template

# Quotas field → the parameter that sets it.
PARAMETERS = {
    "turns_per_context": "MaxTurnsPerContext",
    "turns_per_subject": "MaxTurnsPerSubject",
    "push_configs_per_task": "MaxPushConfigsPerTask",
    "push_configs_per_subject": "MaxPushConfigsPerSubject",
}


def quota_problems(tpl: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the api function would get wrong: a parameter not passed, passed under a name Settings does not read,
    or a default that is not the code's."""
    problems = []
    variables = tpl["Resources"]["ApiFunction"]["Properties"]["Environment"]["Variables"]
    by_parameter = {v["Ref"]: name for name, v in variables.items() if isinstance(v, dict) and "Ref" in v}
    # Each variable set to its parameter's default + 1: a value only the variable can have given.
    for field, parameter in PARAMETERS.items():
        default = tpl["Parameters"][parameter]["Default"]
        if default != getattr(Quotas(), field):
            problems.append(f"{parameter} defaults to {default}, the code to {getattr(Quotas(), field)}")
        if parameter not in by_parameter:
            problems.append(f"ApiFunction gets no variable from {parameter}")
            continue
        monkeypatch.setenv(by_parameter[parameter], str(default + 1))
    quotas = Settings.from_env().quotas
    for field, parameter in PARAMETERS.items():
        wanted = tpl["Parameters"][parameter]["Default"] + 1
        if parameter in by_parameter and getattr(quotas, field) != wanted:
            problems.append(f"{by_parameter[parameter]} (from {parameter}) does not set {field}")
    return problems


def test_each_quota_parameter_reaches_the_api_settings_with_the_codes_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert quota_problems(copy.deepcopy(template.load_template(template.TEMPLATE)), monkeypatch) == []
    assert dataclasses.asdict(Quotas()) == {"turns_per_context": 10, "turns_per_subject": 100,
                                            "push_configs_per_task": 10, "push_configs_per_subject": 100}


def _rename(tpl: dict[str, Any]) -> None:
    variables = tpl["Resources"]["ApiFunction"]["Properties"]["Environment"]["Variables"]
    variables["NYLORUN_MAX_TURNS_PER_CTX"] = variables.pop("NYLORUN_MAX_TURNS_PER_CONTEXT")


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        pytest.param(_rename, "NYLORUN_MAX_TURNS_PER_CTX (from MaxTurnsPerContext) does not set turns_per_context", id="misnamed variable"),
        pytest.param(lambda t: t["Resources"]["ApiFunction"]["Properties"]["Environment"]["Variables"].pop("NYLORUN_MAX_PUSH_CONFIGS_PER_TASK"), "ApiFunction gets no variable from MaxPushConfigsPerTask", id="variable left out"),
        pytest.param(lambda t: t["Parameters"]["MaxTurnsPerSubject"].update(Default=1000), "MaxTurnsPerSubject defaults to 1000, the code to 100", id="defaults disagree"),
    ],
)  # fmt: skip
def test_the_quota_check_fails_on_a_broken_copy(edit: Any, expected: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a copy of the template with one quota wired wrong
    tpl = copy.deepcopy(template.load_template(template.TEMPLATE))
    edit(tpl)
    # Then the check says which
    assert expected in quota_problems(tpl, monkeypatch)
