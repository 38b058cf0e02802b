"""Least privilege, offline: every IAM grant template.yaml writes names the stack's own resources, and "*" only for
actions AWS grants on "*" alone (iam_policy.STAR_ONLY_ACTIONS, each commented). Shown clean on the real template and
dirty on broken copies. `make validate` runs the same check on the template as SAM transforms it.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from iam_policy import (
    ALLOWED_ACTIONS,
    STAR_ONLY_ACTIONS,
    statements,
    template_action_problems,
    template_actions,
    template_problems,
)
from nylorun.adapters.dynamodb import layout
from nylorun_local import template


def real_template() -> dict[str, Any]:
    return copy.deepcopy(template.load_template(template.TEMPLATE))


def inline_statements(tpl: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for logical_id, res in tpl["Resources"].items():
        for policy in (res.get("Properties") or {}).get("Policies", []) or []:
            document = policy.get("PolicyDocument", policy) if isinstance(policy, dict) else {}  # IAM role or SAM
            found += [(logical_id, s) for s in document.get("Statement", [])]
    return found


def test_every_grant_in_the_template_is_scoped_to_the_stack() -> None:
    # Given the template
    tpl = real_template()
    # When every statement, policy template and managed policy of every function and state machine is checked
    problems = template_problems(tpl)
    # Then none grants more than the stack's own resources (or "*" where AWS allows nothing narrower)
    assert problems == []
    # And the walk did see the statements it vouches for, including the star-only ones
    statements = inline_statements(tpl)
    assert {logical_id for logical_id, _ in statements} >= {"ApiFunction", "TurnFunctionRole", "TurnStateMachine"}
    star = {a for _, s in statements if s.get("Resource") == "*" for a in s["Action"]}
    assert star and star <= STAR_ONLY_ACTIONS


def test_the_state_machine_has_no_managed_policy_and_a_narrow_logging_statement() -> None:
    # Given the state machine's policies
    policies = real_template()["Resources"]["TurnStateMachine"]["Properties"]["Policies"]
    # Then no managed policy (CloudWatchLogsFullAccess was one), and the logging statement is the log-delivery set
    assert not any(isinstance(p, str) for p in policies)
    actions = {a for p in policies if "Statement" in p for s in p["Statement"] for a in s["Action"]}
    assert {a for a in actions if a.startswith("logs:")} == {
        "logs:CreateLogDelivery", "logs:GetLogDelivery", "logs:UpdateLogDelivery", "logs:DeleteLogDelivery",
        "logs:ListLogDeliveries", "logs:PutResourcePolicy", "logs:DescribeResourcePolicies", "logs:DescribeLogGroups",
    }  # fmt: skip


def _statement(tpl: dict[str, Any], logical_id: str, statement: dict[str, Any]) -> dict[str, Any]:
    res = tpl["Resources"][logical_id]
    document = {"Statement": [statement]}
    policy = {"PolicyName": "extra", "PolicyDocument": document} if res["Type"] == "AWS::IAM::Role" else document
    res["Properties"]["Policies"].append(policy)
    return tpl


def _turn_role_arns(tpl: dict[str, Any], edit: Any) -> dict[str, Any]:
    """The turn function's role with its ManagedPolicyArns (the !If that adds AgentPolicyArns) edited."""
    props = tpl["Resources"]["TurnFunctionRole"]["Properties"]
    props["ManagedPolicyArns"] = edit(props["ManagedPolicyArns"])
    return tpl


ADMIN = "arn:aws:iam::aws:policy/AdministratorAccess"


def _turn_grant(action: str, sub: Any) -> Any:
    """An edit adding to the turn role an Allow of `action` on the resource `!Sub sub`."""
    return lambda t: _statement(t, "TurnFunctionRole", {"Effect": "Allow", "Action": action, "Resource": {"Fn::Sub": sub}})


def _model_grant(tpl: dict[str, Any]) -> dict[str, Any]:
    """The turn role's conditional bedrock:InvokeModel statement, as the template writes it (!If [HasModel, …])."""
    for policy in tpl["Resources"]["TurnFunctionRole"]["Properties"]["Policies"]:
        for statement in policy["PolicyDocument"]["Statement"]:
            granted = statement.get("Fn::If", [None, {}])[1]
            if "bedrock:InvokeModel" in granted.get("Action", []):
                return granted  # type: ignore[no-any-return]
    raise AssertionError("no model grant")


def _joined(arns: Any) -> list[Any]:
    """The list that the !If's with-grant branch joins: the role's own managed policies, then the agent grant."""
    return arns["Fn::If"][1]["Fn::Split"][1]["Fn::Join"][1]  # type: ignore[no-any-return]


BROKEN: dict[str, tuple[Any, str]] = {
    "GetItem on *": (
        lambda t: _statement(t, "ApiFunction", {"Effect": "Allow", "Action": ["dynamodb:GetItem"], "Resource": "*"}),
        "Resource \"*\" for ['dynamodb:GetItem']",
    ),
    "a wide action beside a star-only one": (
        lambda t: _statement(
            t, "TurnFunctionRole",
            {"Effect": "Allow", "Action": ["states:SendTaskSuccess", "states:StartExecution"], "Resource": "*"},
        ),
        "for ['states:StartExecution']",
    ),
    "a wildcard action on *": (
        lambda t: _statement(t, "PushFunction", {"Effect": "Allow", "Action": "sqs:*", "Resource": ["*"]}),
        "for ['sqs:*']",
    ),
    "a literal ARN of something else": (
        lambda t: _statement(
            t, "DispatchFunction",
            {"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": "arn:aws:sqs:us-east-1:123456789012:other"},
        ),
        "is not one of the stack's own resources",
    ),
    "any table in the account": (
        lambda t: _statement(
            t, "SweepFunction",
            {
                "Effect": "Allow", "Action": "dynamodb:Scan",
                "Resource": {"Fn::Sub": "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/*"},
            },
        ),
        "is not one of the stack's own resources",
    ),
    "NotResource": (
        lambda t: _statement(
            t, "ApiFunction",
            {"Effect": "Allow", "Action": "s3:GetObject", "NotResource": {"Fn::GetAtt": ["FilesBucket", "Arn"]}},
        ),
        "NotAction / NotResource",
    ),
    "CloudWatchLogsFullAccess back on the state machine": (
        lambda t: t["Resources"]["TurnStateMachine"]["Properties"]["Policies"].append("CloudWatchLogsFullAccess")
        or t,
        "managed policy 'CloudWatchLogsFullAccess'",
    ),
    "a policy template over any table": (
        lambda t: t["Resources"]["PublishFunction"]["Properties"]["Policies"].append(
            {"DynamoDBReadPolicy": {"TableName": "*"}}
        )
        or t,
        "DynamoDBReadPolicy TableName '*' is not the stack's own",
    ),
    "an IAM role resource with a star": (
        lambda t: t["Resources"].update(
            ExtraRole={
                "Type": "AWS::IAM::Role",
                "Properties": {
                    "AssumeRolePolicyDocument": {},
                    "Policies": [
                        {
                            "PolicyName": "p",
                            "PolicyDocument": {
                                "Statement": [{"Effect": "Allow", "Action": "s3:PutObject", "Resource": "*"}]
                            },
                        }
                    ],
                },
            }
        )
        or t,
        "ExtraRole.Statement[0]: Resource \"*\" for ['s3:PutObject']",
    ),
    # AgentPolicyArns is the one managed-policy grant the stack does not scope: only that parameter, only spliced in.
    "a literal managed policy beside the agent grant": (
        lambda t: _turn_role_arns(t, lambda a: [arns.insert(0, ADMIN) for arns in (_joined(a), a["Fn::If"][2])] and a),
        "managed policy 'arn:aws:iam::aws:policy/AdministratorAccess'",
    ),
    "another parameter spliced in as the agent grant": (
        lambda t: _turn_role_arns(t, lambda a: _joined(a).__setitem__(-1, {"Fn::Join": [",", {"Ref": "Agents"}]}) or a),
        "managed policy {'Fn::If'",
    ),
    "the agent grant as a policy of a SAM-generated role": (
        lambda t: t["Resources"]["ApiFunction"]["Properties"]["Policies"].append({"Ref": "AgentPolicyArns"}) or t,
        "managed policy {'Ref': 'AgentPolicyArns'} (its grants",  # ApiFunction.Policies[n], n the appended one's
    ),
    # The model and guardrail the parameters choose, and nothing wider.
    "any model in the Region": (
        _turn_grant("bedrock:InvokeModel", "arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/*"),
        "is not one of the stack's own resources",
    ),
    "any profile's model in any Region": (
        _turn_grant("bedrock:InvokeModel", "arn:${AWS::Partition}:bedrock:*::foundation-model/${ModelInferenceProfile}"),
        "is not one of the stack's own resources",
    ),
    "a guardrail named by another parameter": (
        _turn_grant(
            "bedrock:ApplyGuardrail",
            ["arn:${AWS::Partition}:bedrock:${AWS::Region}:${AWS::AccountId}:guardrail/${G}", {"G": {"Ref": "Agents"}}],
        ),
        "is not one of the stack's own resources",
    ),
    "the template's own model grant widened to any model": (
        lambda t: _model_grant(t).update(Resource={"Fn::Sub": "arn:${AWS::Partition}:bedrock:*::foundation-model/*"})
        or t,
        "is not one of the stack's own resources",
    ),
    "ModelId allowing a wildcard": (
        lambda t: t["Parameters"]["ModelId"].update(AllowedPattern="^[a-z0-9.*:-]*$") or t,
        "ModelId: AllowedPattern '^[a-z0-9.*:-]*$' is wrong about ['*', 'amazon.*']",
    ),
    "AgentPolicyArns allowing any ARN": (
        lambda t: t["Parameters"]["AgentPolicyArns"].update(AllowedPattern="^.*$") or t,
        "AgentPolicyArns: AllowedPattern '^.*$' is wrong about ['*',",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BROKEN))
def test_the_check_fails_on_a_broken_copy(case: str) -> None:
    # Given a copy of the template with one grant too many
    edit, expected = BROKEN[case]
    tpl = edit(real_template())
    # When checked
    problems = template_problems(tpl)
    # Then that grant is reported, and nothing else
    assert any(expected in p for p in problems), problems
    assert len(problems) == 1, problems


def test_a_deny_with_star_and_a_star_only_action_are_not_findings() -> None:
    # Given a copy with a Deny on "*" (it narrows) and SendTaskHeartbeat on "*" (nothing narrower exists)
    tpl = _statement(real_template(), "TurnFunctionRole", {"Effect": "Deny", "Action": "dynamodb:*", "Resource": "*"})
    tpl = _statement(tpl, "TurnFunctionRole", {"Effect": "Allow", "Action": "states:SendTaskHeartbeat", "Resource": "*"})
    # Then it is still clean
    assert template_problems(tpl) == []


def test_every_role_holds_only_the_actions_its_code_calls() -> None:
    # Given the template
    tpl = real_template()
    # When each role's granted actions are compared with the allow-list (ALLOWED_ACTIONS: the calls its code makes)
    problems = template_action_problems(tpl)
    granted = template_actions(tpl)
    # Then none holds more, and every function's role was seen
    assert problems == []
    # (the schedules' roles only SAM's transform makes)
    assert set(granted) == set(ALLOWED_ACTIONS) - {"SweepFunctionDailyRole", "SweepFunctionUncertainGaugeRole"}
    # And the function that runs Agents' code can delete nothing, change no ACL or lifecycle, scan nothing
    turn = granted["TurnFunctionRole"]
    assert not turn & {"s3:DeleteObject", "s3:PutObjectAcl", "s3:PutLifecycleConfiguration", "dynamodb:DeleteItem",
                       "dynamodb:Scan", "dynamodb:BatchWriteItem"}


def _turn_leading_keys(tpl: dict[str, Any]) -> list[str]:
    for policy in tpl["Resources"]["TurnFunctionRole"]["Properties"]["Policies"]:
        for statement in policy["PolicyDocument"]["Statement"]:
            if any(str(a).startswith("dynamodb:") for a in statement["Action"]):
                return list(statement["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"])
    return []


def test_the_turn_reaches_only_the_items_a_turn_touches() -> None:
    # Given the turn role's table statement
    keys = _turn_leading_keys(real_template())
    # Then it is scoped by partition key to the task, journal, context and file items and the subject's quota counts
    # (released by the ending status), and the subject's connections (docs/writing/connections.md: a turn
    # reads and refreshes its tokens): no push config (credentials), no message dedupe record, no consent in
    # flight (CSTATE#)
    assert sorted(keys) == ["CONN#*", "CTX#*", "FILE#*", "JRN#*", "SUBJ#*", "TASK#*"]


def _turn_statement(tpl: dict[str, Any], action: str) -> dict[str, Any]:
    """The turn role's statement that grants `action`."""
    for policy in tpl["Resources"]["TurnFunctionRole"]["Properties"]["Policies"]:
        for statement in statements(policy["PolicyDocument"]):
            if action in statement["Action"]:
                return statement  # type: ignore[no-any-return]
    raise AssertionError(action)


def _sam_policy(logical_id: str, policy: Any) -> Any:
    return lambda t: t["Resources"][logical_id]["Properties"]["Policies"].append(policy) or t


BROKEN_ACTIONS: dict[str, tuple[Any, str]] = {
    "DeleteObject on the turn role": (
        lambda t: _turn_statement(t, "s3:PutObject")["Action"].append("s3:DeleteObject") or t,
        "TurnFunctionRole: actions the code does not call: ['s3:DeleteObject']",
    ),
    "the turn role's S3 statement back to S3CrudPolicy's actions": (
        lambda t: _turn_statement(t, "s3:PutObject").update(Action=[
            "s3:GetObject", "s3:ListBucket", "s3:GetBucketLocation", "s3:GetObjectVersion", "s3:PutObject",
            "s3:PutObjectAcl", "s3:GetLifecycleConfiguration", "s3:PutLifecycleConfiguration", "s3:DeleteObject",
        ]) or t,
        "'s3:PutLifecycleConfiguration', 's3:PutObjectAcl'",
    ),
    # The turn opens connections' tokens (kms:Decrypt, purpose connection): which purposes each role may open is
    # test_each_function_may_seal_or_open_only_its_own_kind_of_secret's; an action it never calls is this check's.
    "kms:CreateGrant on the turn role (it could hand the key on)": (
        lambda t: _turn_statement(t, "kms:Encrypt")["Action"].append("kms:CreateGrant") or t,
        "TurnFunctionRole: actions the code does not call: ['kms:CreateGrant']",
    ),
    "DynamoDBCrudPolicy back on the push function": (
        _sam_policy("PushFunction", {"DynamoDBCrudPolicy": {"TableName": {"Ref": "TasksTable"}}}),
        "PushFunctionRole: actions the code does not call: ['DynamoDBCrudPolicy (policy template)']",
    ),
    "S3CrudPolicy back on the api function": (
        _sam_policy("ApiFunction", {"S3CrudPolicy": {"BucketName": {"Ref": "FilesBucket"}}}),
        "ApiFunctionRole: actions the code does not call: ['S3CrudPolicy (policy template)']",
    ),
    "Scan on the sweep": (
        _sam_policy("SweepFunction", {"Statement": [
            {"Effect": "Allow", "Action": ["dynamodb:Scan"], "Resource": {"Fn::GetAtt": ["TasksTable", "Arn"]}}
        ]}),
        "SweepFunctionRole: actions the code does not call: ['dynamodb:Scan']",
    ),
    "a new function with a grant nobody listed": (
        lambda t: t["Resources"].update(ExtraFunction={"Type": "AWS::Serverless::Function", "Properties": {
            "Policies": [{"Statement": [{"Effect": "Allow", "Action": "dynamodb:GetItem",
                                         "Resource": {"Fn::GetAtt": ["TasksTable", "Arn"]}}]}]}}) or t,
        "ExtraFunctionRole: actions the code does not call: ['dynamodb:GetItem'] (a role ALLOWED_ACTIONS does not list)",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BROKEN_ACTIONS))
def test_the_action_check_fails_on_a_broken_copy(case: str) -> None:
    # Given a copy of the template whose role holds an action its code never calls
    edit, expected = BROKEN_ACTIONS[case]
    tpl = edit(real_template())
    # When checked
    problems = template_action_problems(tpl)
    # Then that role is reported, and nothing else
    assert len(problems) == 1 and expected in problems[0], problems


def _kms_grants(tpl: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(role, action, purpose) of every KMS statement: the purpose its encryption-context condition names."""
    grants = set()
    for logical_id, res in tpl["Resources"].items():
        for policy in (res.get("Properties") or {}).get("Policies", []) or []:
            document = policy.get("PolicyDocument", policy) if isinstance(policy, dict) else {}
            for statement in statements(document):  # a conditional statement's every branch too
                for action in [a for a in statement["Action"] if str(a).startswith("kms:")]:
                    purposes = statement["Condition"]["StringEquals"]["kms:EncryptionContext:nylorun:purpose"]
                    for purpose in purposes if isinstance(purposes, list) else [purposes]:
                        grants.add((logical_id, action, purpose))
    return grants


def test_each_function_may_seal_or_open_only_its_own_kind_of_secret() -> None:
    # Given the template's KMS grants
    grants = _kms_grants(real_template())
    # Then the api seals push credentials and opens callback tokens and delegations (a delegate's callback keys, its
    # credentials for a cancel), the turn (Agents' code) only seals callback tokens and delegations, the push
    # function only opens push credentials; nobody else touches the key
    assert grants == {
        ("ApiFunction", "kms:Encrypt", "push-credential"),
        ("ApiFunction", "kms:Decrypt", "task-token"),
        ("ApiFunction", "kms:Decrypt", "delegation"),
        ("TurnFunctionRole", "kms:Encrypt", "task-token"),
        ("TurnFunctionRole", "kms:Encrypt", "delegation"),
        ("PushFunction", "kms:Decrypt", "push-credential"),
        # docs/writing/connections.md: the api seals tokens at the callback and opens them to revoke; the turn
        # opens them to use and seals refreshed ones. The push function never sees one.
        ("ApiFunction", "kms:Encrypt", "connection"),
        ("ApiFunction", "kms:Decrypt", "connection"),
        ("TurnFunctionRole", "kms:Encrypt", "connection"),
        ("TurnFunctionRole", "kms:Decrypt", "connection"),
    }


def test_the_push_function_may_keep_the_cursor_of_a_fan_out_in_steps() -> None:
    # Given the push role's table statement, and the item a fan-out of more configs than one step keeps its place in
    # (moto checks no IAM: before, a second step would have been refused on AWS, its cursor's key outside the role)
    cursor = layout.fan_out("task", "event")["PK"].split("#")[0] + "#*"
    tpl = real_template()
    for policy in tpl["Resources"]["PushFunction"]["Properties"]["Policies"]:
        for statement in statements(policy if "Statement" in policy else {}):
            if "dynamodb:Query" in statement["Action"]:
                keys = statement["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
                # Then it may read, write and remove that item (PushTableStore.set_fan_out_cursor: PutItem, DeleteItem)
                assert cursor in keys
                assert {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem"} <= set(statement["Action"])
                return
    raise AssertionError("no table statement on the push role")
