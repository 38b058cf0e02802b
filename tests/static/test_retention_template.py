"""Retention in the template (README "Data retention"): the sweep's stream mapping takes DynamoDB's TTL removals of
expired tasks and nothing else, and the files bucket's lifecycle never deletes a file before its task expires
(by the margin the README states), for every RetentionDays a deployment may choose."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from moto.events.models import EventPattern
from nylorun.settings import Settings
from nylorun_local import template

MARGIN_DAYS = 30  # README "Data retention": a file outlives its task by this margin
SAMPLE = json.loads((Path(__file__).parents[2] / "events" / "sweep-ttl-removal.json").read_text())["Records"][0]


def real_template() -> dict[str, Any]:
    return copy.deepcopy(template.load_template(template.TEMPLATE))


def retention_problems(tpl: dict[str, Any]) -> list[str]:
    problems = []
    days = tpl["Parameters"]["RetentionDays"]
    allowed = [int(d) for d in days["AllowedValues"]]
    mapping = tpl["Mappings"]["RetentionFiles"]
    settings = Settings.model_fields["retention_days"].metadata
    low, high = (next(getattr(m, bound) for m in settings if hasattr(m, bound)) for bound in ("ge", "le"))
    if int(days["Default"]) not in allowed or not all(low <= d <= high for d in allowed):
        problems.append(f"RetentionDays {allowed} (default {days['Default']}) is outside the settings' {low}-{high}")
    for d in allowed:
        files = int(mapping.get(str(d), {}).get("Days", 0))
        if files < d + MARGIN_DAYS:
            problems.append(f"RetentionFiles[{d}] is {files} days: a file could go before its task")
    rules = {r["Id"]: r for r in tpl["Resources"]["FilesBucket"]["Properties"]["LifecycleConfiguration"]["Rules"]}
    wanted = {"Fn::FindInMap": ["RetentionFiles", {"Ref": "RetentionDays"}, "Days"]}
    for rule in rules.values():
        for field in ("ExpirationInDays", "NoncurrentDays"):
            value = rule.get(field, (rule.get("NoncurrentVersionExpiration") or {}).get(field))
            if value is not None and rule.get("Prefix") is None and value != wanted:
                problems.append(f"lifecycle rule {rule['Id']}: {field} {value} is not RetentionFiles")
    env = tpl["Globals"]["Function"]["Environment"]["Variables"]
    if env.get("NYLORUN_RETENTION_DAYS") != {"Ref": "RetentionDays"}:
        problems.append("the functions do not get NYLORUN_RETENTION_DAYS from RetentionDays")
    return problems


def sweep_patterns(tpl: dict[str, Any]) -> list[EventPattern]:
    events = tpl["Resources"]["SweepFunction"]["Properties"]["Events"]
    return [EventPattern.load(f["Pattern"]) for e in events.values() if e["Type"] == "DynamoDB"
            for f in e["Properties"]["FilterCriteria"]["Filters"]]


def test_retention_parameter_mapping_lifecycle_and_environment_agree() -> None:
    # Given the template: every RetentionDays the settings take, files kept at least the margin longer, the lifecycle
    # rules following it, and the functions told
    assert retention_problems(real_template()) == []


BROKEN = {
    "a retention the settings refuse": (
        lambda t: t["Parameters"]["RetentionDays"]["AllowedValues"].append(5000) or t, "outside the settings"),
    "files kept no longer than their task": (
        lambda t: t["Mappings"]["RetentionFiles"]["90"].update(Days=90) or t, "RetentionFiles[90] is 90 days"),
    "a value without its files' days": (
        lambda t: t["Parameters"]["RetentionDays"]["AllowedValues"].append(2) or t, "RetentionFiles[2] is 0 days"),
    "the old fixed 90 noncurrent days": (
        lambda t: t["Resources"]["FilesBucket"]["Properties"]["LifecycleConfiguration"]["Rules"][0].update(
            NoncurrentVersionExpiration={"NoncurrentDays": 90}) or t, "NoncurrentDays 90 is not RetentionFiles"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BROKEN))
def test_the_retention_check_fails_on_a_broken_copy(case: str) -> None:
    # Given a copy of the template with one retention setting broken
    edit, expected = BROKEN[case]
    # When checked
    problems = retention_problems(edit(real_template()))
    # Then that is what is reported
    assert any(expected in p for p in problems), problems


RECORDS = {
    "a user's delete of an expired task": (lambda r: r.pop("userIdentity"), False),
    "TTL removing an artifact": (lambda r: r["dynamodb"]["Keys"].update(SK={"S": "ART#a1"}), False),
    "a change of a task item": (lambda r: r.update(eventName="MODIFY"), False),
    "TTL removing a task item without expiresAt": (lambda r: r["dynamodb"]["OldImage"].pop("expiresAt"), False),
    "TTL removing an expired task item": (lambda r: None, True),
}


@pytest.mark.parametrize("case", list(RECORDS))
def test_the_sweep_takes_only_ttl_removals_of_expired_tasks(case: str) -> None:
    # Given a stream record
    edit, taken = RECORDS[case]
    record = copy.deepcopy(SAMPLE)
    edit(record)
    # Then the sweep's stream mapping (its FilterCriteria, as Lambda applies them) takes it only if it is TTL's
    # removal of an expired task item
    assert any(p.matches_event(record) for p in sweep_patterns(real_template())) is taken
