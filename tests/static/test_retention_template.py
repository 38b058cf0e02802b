"""Retention in the template (docs/operate.md#data-retention): the sweep's stream mapping takes DynamoDB's TTL
removals of expired tasks and nothing else, the publish function's only writes, the files bucket's lifecycle
never deletes a file before its task expires (by the margin that page states), for every RetentionDays a
deployment may choose, and the keys the table's items need outlive the stack as the table does."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from moto.events.models import EventPattern
from nylorun.settings import Settings
from nylorun_local import template

ROOT = Path(__file__).parents[2]
EVENTS = ROOT / "events"
SAMPLE = json.loads((EVENTS / "sweep-ttl-removal.json").read_text())["Records"][0]
PUBLISHED = json.loads((EVENTS / "publish-dynamodb-stream.json").read_text())["Records"][0]  # a status change


def stated_margin_days() -> int:
    """The margin docs/operate.md#data-retention states: every file version is deleted `RetentionDays` + N days after
    it was written or replaced."""
    found = re.findall(r"`RetentionDays` \+ (\d+) days", (ROOT / "docs" / "operate.md").read_text(encoding="utf-8"))
    assert len(found) == 1, "docs/operate.md states the files' margin once, as `RetentionDays` + N days"
    return int(found[0])


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
        if files < d + stated_margin_days():
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


def stream_patterns(tpl: dict[str, Any], function: str = "SweepFunction") -> list[EventPattern]:
    events = tpl["Resources"][function]["Properties"]["Events"]
    return [EventPattern.load(f["Pattern"]) for e in events.values() if e["Type"] == "DynamoDB"
            for f in e["Properties"]["FilterCriteria"]["Filters"]]


def test_retention_parameter_mapping_lifecycle_and_environment_agree() -> None:
    # Given the template: every RetentionDays the settings take, files kept at least the margin longer, the lifecycle
    # rules following it, and the functions told
    assert retention_problems(real_template()) == []


def test_files_are_kept_exactly_the_margin_the_operate_page_states() -> None:
    # Given the margin docs/operate.md "Data retention" states, and the template's files' days for each RetentionDays
    margin = stated_margin_days()
    mapping = real_template()["Mappings"]["RetentionFiles"]
    # When each retention's files' days are compared with that retention plus the margin
    wrong = {d: f["Days"] for d, f in mapping.items() if int(f["Days"]) != int(d) + margin}
    # Then every one is exactly that: a reader of the page knows when a file goes
    assert wrong == {}, f"RetentionFiles days are not RetentionDays + {margin} (docs/operate.md): {wrong}"


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
    assert any(p.matches_event(record) for p in stream_patterns(real_template())) is taken


def _artifact(record: dict[str, Any]) -> None:
    record.update(eventName="INSERT")
    record["dynamodb"]["Keys"]["SK"] = record["dynamodb"]["NewImage"]["SK"] = {"S": "ART#a1"}


def _removed(record: dict[str, Any]) -> None:
    record.update(eventName="REMOVE")
    record["dynamodb"]["OldImage"] = record["dynamodb"].pop("NewImage")


PUBLISH_RECORDS = {
    "a task's status change": (lambda r: None, True),
    "a new task": (lambda r: r.update(eventName="INSERT"), True),
    "an artifact written": (_artifact, True),
    "TTL removing an expired task item": (lambda r: r.clear() or r.update(copy.deepcopy(SAMPLE)), False),
    "the sweep removing a task item": (_removed, False),
    "the sweep removing an artifact": (lambda r: _artifact(r) or _removed(r), False),
}


@pytest.mark.parametrize("case", list(PUBLISH_RECORDS))
def test_the_publish_function_takes_only_writes_of_tasks_and_artifacts(case: str) -> None:
    # Given a stream record
    edit, taken = PUBLISH_RECORDS[case]
    record = copy.deepcopy(PUBLISHED)
    edit(record)
    # Then the publish function's mapping takes it only if it writes a task or an artifact: a removal is no A2A event
    # (the code drops it), so Lambda drops it uninvoked rather than bill an invocation for it
    assert any(p.matches_event(record) for p in stream_patterns(real_template(), "PublishFunction")) is taken


# The keys whose output the table keeps: push credentials and callback tokens sealed with the KMS key, subjects keyed
# with the Runtime's key. Deleted with the stack while the table is retained, those items can never be read again
# (a KMS key is gone for good after its 7-30 day waiting period:
# https://docs.aws.amazon.com/kms/latest/developerguide/deleting-keys.html).
TABLE_KEYS = ("NYLORUN_KMS_KEY", "NYLORUN_RUNTIME_KEY_ARN")


def kept_key_problems(tpl: dict[str, Any]) -> list[str]:
    env, resources = tpl["Globals"]["Function"]["Environment"]["Variables"], tpl["Resources"]
    table = resources["TasksTable"]
    problems = []
    for variable in TABLE_KEYS:
        node = env[variable]
        name = node["Fn::GetAtt"][0] if "Fn::GetAtt" in node else node["Ref"]
        for policy in ("DeletionPolicy", "UpdateReplacePolicy"):
            if table.get(policy) == "Retain" and resources[name].get(policy) != "Retain":
                problems.append(f"{name} ({variable}): {policy} is not Retain, as TasksTable's is")
    return problems


def test_the_keys_the_table_s_items_need_are_retained_with_the_table() -> None:
    # Given the template, whose table outlives the stack
    # Then so do the keys that seal and key its items
    assert kept_key_problems(real_template()) == []


@pytest.mark.parametrize("policy", ["DeletionPolicy", "UpdateReplacePolicy"])
def test_the_kept_key_check_fails_on_a_key_deleted_with_the_stack(policy: str) -> None:
    # Given a copy whose KMS key goes with the stack (or with a replacement)
    tpl = real_template()
    del tpl["Resources"]["StackKey"][policy]
    # Then it is named
    assert kept_key_problems(tpl) == [f"StackKey (NYLORUN_KMS_KEY): {policy} is not Retain, as TasksTable's is"]
