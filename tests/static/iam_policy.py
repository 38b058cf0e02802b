"""Least privilege over a template's IAM: every Allow statement names the stack's own resources, or "*" only for
actions that AWS grants on "*" alone. Pure Python over a template dict (no pytest, no nylorun), so that
`tests/static/test_least_privilege.py` runs it on template.yaml and `make validate` (SAM CLI's venv) runs it on
the template as SAM transforms it (tests/static/sam_iam_check.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

# Actions that take no resource narrower than "*": the IAM service authorization reference lists no resource type
# for them, so a statement granting them must say "*". Nothing else may.
STAR_ONLY_ACTIONS = {
    # Step Functions task tokens: the token, not an ARN, names the task (api and turn functions answer waits).
    "states:SendTaskSuccess",
    "states:SendTaskFailure",
    "states:SendTaskHeartbeat",
    # CloudWatch Logs vended log deliveries (Step Functions logging): the statement the Step Functions guide asks for.
    "logs:CreateLogDelivery",
    "logs:GetLogDelivery",
    "logs:UpdateLogDelivery",
    "logs:DeleteLogDelivery",
    "logs:ListLogDeliveries",
    "logs:PutResourcePolicy",
    "logs:DescribeResourcePolicies",
    "logs:DescribeLogGroups",
    # X-Ray tracing (SAM attaches these through AWSXrayWriteOnlyAccess when Tracing is on).
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "xray:GetSamplingRules",
    "xray:GetSamplingTargets",
    "xray:GetSamplingStatisticSummaries",
    # CloudWatch metrics: no resource type; narrow it with a cloudwatch:namespace condition instead.
    "cloudwatch:PutMetricData",
}

# Least privilege by action: each role's every action, and the code that makes the call
# (docs/security.md#least-privilege). A role the template grants (a SAM function's generated "<Function>Role",
# or one written out) may hold these and nothing else; a role not listed here may hold nothing. DynamoDB calls
# are the adapters' (layers/runtime/nylorun/ adapters/dynamodb): get_item → GetItem, query (and its paginator)
# → Query, put_item → PutItem, update_item → UpdateItem, delete_item → DeleteItem; a TransactWriteItems is
# authorised item by item as PutItem, UpdateItem and ConditionCheckItem
# (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html). S3
# (adapters/s3.py): put_object → PutObject; get_object and presigned GETs name a VersionId → GetObject and
# GetObjectVersion; only the sweep deletes (an expired task's versions: DeleteObjects → DeleteObjectVersion).
# Nobody changes an ACL or the lifecycle, lists the bucket, scans or batches a table write.
ALLOWED_ACTIONS: dict[str, frozenset[str]] = {
    "ApiFunctionRole": frozenset({
        # tasks, contexts, dedupe records (SendMessage), answers (journal), push configs (Set/Get/List/Delete),
        # callback tokens (answer, cancel), the subject's quota counts; ListTasks queries BySubject / ByContext
        "dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
        "s3:PutObject", "s3:GetObject", "s3:GetObjectVersion",  # inbound raw parts; presigned GETs
        "s3:PutObjectVersionTagging",  # a refused request's inbound files, tagged to expire (adapters/s3.py)
        "sqs:SendMessage*",  # SQSSendMessagePolicy: a turn queued behind a busy context
        # the push secret (a caller's own signing keys); the Runtime key (keyed subject digests, page tokens)
        "secretsmanager:GetSecretValue",
        "states:StartExecution", "states:StopExecution", "states:SendTaskSuccess", "states:SendTaskFailure",
        # seals push credentials (purpose push-credential); opens callback tokens; seals and opens connections' tokens
        "kms:Encrypt", "kms:Decrypt",
    }),
    "TurnFunctionRole": frozenset({
        # the task, its journal (ConditionCheck: no effect after CANCELED), its context, its file versions, its
        # subject's quota counts (the ending status releases them)
        "dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem",
        "s3:PutObject", "s3:GetObject", "s3:GetObjectVersion",  # fetched url parts, outputs, reading inbound files
        "states:StartExecution", "states:SendTaskSuccess", "states:SendTaskFailure",  # next turn; resume / abandon
        "kms:Encrypt",  # seals the callback token it parks, and a connection's refreshed tokens
        "kms:Decrypt",  # opens a connection's tokens (purpose connection) to use them; nothing else
        "secretsmanager:GetSecretValue",  # the Runtime key: the subject's keyed digest
        # nylorun.models (models/bedrock.py): converse → InvokeModel on the ModelId; with a guardrail, ApplyGuardrail
        "bedrock:InvokeModel", "bedrock:ApplyGuardrail",
    }),
    "DispatchFunctionRole": frozenset({
        "dynamodb:GetItem", "dynamodb:UpdateItem",  # the task and its context; claim_next's transaction
        "states:StartExecution", "sqs:ChangeMessageVisibility",  # start the turn; wait while the context is busy
        "secretsmanager:GetSecretValue",  # the Runtime key: the next turn's id is keyed by its subject
    }),
    "PublishFunctionRole": frozenset({
        "dynamodb:GetItem",  # whose an artifact is (the task item)
        "dynamodb:Query",  # does a pushed event's task have a push config (queued only then)
        # the bus; the push queue (SQSSendMessagePolicy); the stream's on-failure destination (PublishDLQ:
        # SQSSendMessagePolicy, and the SendMessage SAM adds itself for a DestinationConfig)
        "events:PutEvents", "sqs:SendMessage*", "sqs:SendMessage",
    }),
    "PushFunctionRole": frozenset({
        # configs: list (Query), expire (UpdateItem; a fan-out step's in one transaction), read, remove on 410
        # (DeleteItem, with its task's and subject's counts: UpdateItem in the same transaction); the task's items
        # (re-read); a fan-out's cursor (PutItem, DeleteItem)
        "dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem", "dynamodb:PutItem", "dynamodb:DeleteItem",
        "s3:GetObject", "s3:GetObjectVersion",  # presigned URLs of file artifacts
        # deliveries, dead letters; retry delays; a message deleted as soon as it is handled, not with its batch
        "sqs:SendMessage*", "sqs:ChangeMessageVisibility", "sqs:DeleteMessage",
        "secretsmanager:GetSecretValue",  # the push secret
        "kms:Decrypt",  # opens a config's credentials and token
    }),
    "SweepFunctionRole": frozenset({
        # the PushConfigs index; is the task there; remove a config, and an expired one's counts (its task's and,
        # while the task is open, its subject's: delete_push_config's transaction, UpdateItem); an expired task
        # (docs/operate.md#data-retention, adapters/dynamodb/retention.py): read its partitions (Query),
        # delete its items; the Uncertain index (the uncertainty gauge: Query)
        "dynamodb:Query", "dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
        "s3:DeleteObjectVersion",  # an expired task's file versions (adapters/s3.py delete_versions: DeleteObjects)
        # the stream's on-failure destination (PublishDLQ: SQSSendMessagePolicy, and the SendMessage SAM adds itself
        # for a DestinationConfig)
        "sqs:SendMessage*", "sqs:SendMessage",
    }),
    "SweepFunctionDailyRole": frozenset({"lambda:InvokeFunction"}),  # SAM's role for the daily schedule
    "SweepFunctionUncertainGaugeRole": frozenset({"lambda:InvokeFunction"}),  # SAM's role for the 5-minute gauge
    "TurnStateMachineRole": frozenset({
        "lambda:InvokeFunction",
        "logs:CreateLogDelivery", "logs:GetLogDelivery", "logs:UpdateLogDelivery", "logs:DeleteLogDelivery",
        "logs:ListLogDeliveries", "logs:PutResourcePolicy", "logs:DescribeResourcePolicies", "logs:DescribeLogGroups",
    }),
}  # fmt: skip

# What the SAM policy templates the template still uses expand to (samtranslator's policy_templates.json); the
# ones that grant more than a function calls (DynamoDBCrudPolicy, DynamoDBReadPolicy, S3CrudPolicy, S3ReadPolicy)
# are spelled out as statements instead.
POLICY_TEMPLATE_ACTIONS: dict[str, frozenset[str]] = {
    "SQSSendMessagePolicy": frozenset({"sqs:SendMessage*"}),
    "EventBridgePutEventsPolicy": frozenset({"events:PutEvents"}),
    "AWSSecretsManagerGetSecretValuePolicy": frozenset({"secretsmanager:GetSecretValue"}),
    "LambdaInvokePolicy": frozenset({"lambda:InvokeFunction"}),
}


# SAM policy templates that SAM scopes to the resource named in their argument (an ARN built from it): allowed
# when that argument names one of the stack's own resources.
SCOPED_POLICY_TEMPLATES = {
    "DynamoDBCrudPolicy": "TableName",
    "DynamoDBReadPolicy": "TableName",
    "DynamoDBWritePolicy": "TableName",
    "SQSSendMessagePolicy": "QueueName",
    "SQSPollerPolicy": "QueueName",
    "S3CrudPolicy": "BucketName",
    "S3ReadPolicy": "BucketName",
    "S3WritePolicy": "BucketName",
    "LambdaInvokePolicy": "FunctionName",
    "EventBridgePutEventsPolicy": "EventBusName",
    "AWSSecretsManagerGetSecretValuePolicy": "SecretArn",
    "StepFunctionsExecutionPolicy": "StateMachineName",
}

# AWS managed policies a SAM function's or state machine's Policies may name. None: each one's grants are outside
# this file and broader than the stack (CloudWatchLogsFullAccess was one). SAM adds its own (AWSLambdaBasicExecutionRole,
# AWSXrayWriteOnlyAccess, and the SQS / DynamoDB event source execution roles) to the roles it generates; `make
# validate` lists those. A role the template writes out may name those same ones (SAM_MANAGED_POLICIES) and the
# agent grant (AGENT_POLICY_PARAMETER), nothing else.
ALLOWED_MANAGED_POLICIES: set[str] = set()

# The managed policies SAM itself attaches to the roles it generates (checked on the transformed template).
SAM_MANAGED_POLICIES = {
    "service-role/AWSLambdaBasicExecutionRole",  # logs:CreateLogGroup/CreateLogStream/PutLogEvents
    "AWSXrayWriteOnlyAccess",  # Tracing: Active / Enabled
    "service-role/AWSLambdaSQSQueueExecutionRole",  # SQS event sources (dispatch, push)
    "service-role/AWSLambdaDynamoDBExecutionRole",  # the table's stream (publish)
}

# The user's explicit grant to their own Agents' code (template.yaml, AgentPolicyArns): IAM managed policy ARNs
# attached to the turn function's role. Not the stack's to scope, so the one exception to this file's rule, accepted
# only as this parameter, only spliced after a role's own managed policies in exactly agent_grant_base's form.
AGENT_POLICY_PARAMETER = "AgentPolicyArns"
_AGENT_GRANT = {"Fn::Join": [",", {"Ref": AGENT_POLICY_PARAMETER}]}

# The UUID part of the stack's id: unique to this stack (arn:…:stack/<name>/<uuid>).
STACK_UUID = {"Fn::Select": [2, {"Fn::Split": ["/", {"Ref": "AWS::StackId"}]}]}
_SUB_VAR = re.compile(r"\$\{([^}!]+)\}")
_POLICY_OWNERS = ("AWS::Serverless::Function", "AWS::Serverless::StateMachine")
_POLICY_DOCUMENTS = {
    "AWS::IAM::Role": "Policies",
    "AWS::IAM::Policy": "PolicyDocument",
    "AWS::IAM::ManagedPolicy": "PolicyDocument",
    "AWS::SQS::QueuePolicy": "PolicyDocument",
    "AWS::S3::BucketPolicy": "PolicyDocument",
    "AWS::SNS::TopicPolicy": "PolicyDocument",
}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


# The Bedrock model the stack's ModelId parameter names is the one resource outside the stack a role may
# reach: the model in this Region, or through a cross-Region inference profile, the profile here and the model in any
# Region it routes to (its geography's: the docs' "each Region associated with it",
# https://docs.aws.amazon.com/bedrock/latest/userguide/inference-profiles-prereq.html); and the guardrail named by
# ModelGuardrail. Nothing but those parameters' values may follow the resource type: no wildcard model.
_MODEL_ARNS = (
    re.compile(r"arn:\$\{AWS::Partition\}:bedrock:\$\{AWS::Region\}::foundation-model/\$\{ModelId\}"),
    re.compile(r"arn:\$\{AWS::Partition\}:bedrock:\*::foundation-model/\$\{ModelId\}"),
    re.compile(
        r"arn:\$\{AWS::Partition\}:bedrock:\$\{AWS::Region\}:\$\{AWS::AccountId\}:inference-profile/"
        r"\$\{ModelInferenceProfile\}\.\$\{ModelId\}"
    ),
)
_GUARDRAIL_ARN = re.compile(r"arn:\$\{AWS::Partition\}:bedrock:\$\{AWS::Region\}:\$\{AWS::AccountId\}:guardrail/\$\{(\w+)\}")
_GUARDRAIL_ID = {"Fn::Select": [0, {"Fn::Split": [":", {"Ref": "ModelGuardrail"}]}]}


def _model_scoped(resource: Any) -> bool:
    """A Sub naming the stack's chosen model (ModelId) or guardrail (ModelGuardrail's identifier), exactly."""
    arg = resource.get("Fn::Sub") if isinstance(resource, dict) and set(resource) == {"Fn::Sub"} else None
    text, local = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1]) if isinstance(arg, list) else (None, {})
    if not isinstance(text, str):
        return False
    if any(pattern.fullmatch(text) for pattern in _MODEL_ARNS):
        return True
    guardrail = _GUARDRAIL_ARN.fullmatch(text)
    return guardrail is not None and local.get(guardrail.group(1)) == _GUARDRAIL_ID


def scope(resource: Any, resources: set[str]) -> str:
    """"any" for "*", "stack" for an ARN of this stack's resources (or of the model and guardrail its parameters
    choose), else "foreign" (a literal ARN, another parameter, a Sub that names nothing of the stack, a wildcard
    after the stack's part)."""
    if resource == "*":
        return "any"
    if _model_scoped(resource):
        return "stack"
    if isinstance(resource, dict) and len(resource) == 1:
        (fn, arg), = resource.items()
        if fn == "Ref":
            return "stack" if arg in resources else "foreign"
        if fn == "Fn::GetAtt":
            name = arg[0] if isinstance(arg, list) else str(arg).split(".", 1)[0]
            return "stack" if name in resources else "foreign"
        if fn == "Fn::Sub":
            text, local = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
            anchors = [
                v for v in _SUB_VAR.findall(text)
                if v.split(".", 1)[0] in resources or v == "AWS::StackName"
                or (v in local and scope(local[v], resources) == "stack")
            ]  # fmt: skip
            if not anchors:
                return "foreign"
            # Nothing but a wildcard may follow the last account/region-free part: "…:function:${F}*" is fine,
            # "…:table/*" (any table) is not, and neither is a "*" region or account.
            if re.search(r"arn:[^:]*:[^:]*:\*:|arn:[^:]*:[^:]*:[^:]*:\*:", text):
                return "foreign"
            return "stack"
        if fn == "Fn::If":
            # A branch may be a list of resources (Resource: !If [cond, [a, b], [c]]): each must be scoped.
            branches = [scope(r, resources) for b in arg[1:] if b != {"Ref": "AWS::NoValue"} for r in _as_list(b)]
            return "stack" if branches and all(b == "stack" for b in branches) else "foreign"
        if fn == "Fn::Join":
            return scope({"Fn::Sub": "".join(p if isinstance(p, str) else "${X}" for p in arg[1])}, resources)
        if resource == STACK_UUID:
            return "stack"  # names built from the stack id's UUID (TurnStateMachine's) belong to this stack alone
    return "foreign"


def agent_grant_base(arns: Any) -> list[Any] | None:
    """A role's ManagedPolicyArns in the form that adds AgentPolicyArns when it is set, else None:
    !If [cond, !Split [",", !Join [",", [*base, !Join [",", !Ref AgentPolicyArns]]]], base]; returns base."""
    if not (isinstance(arns, dict) and set(arns) == {"Fn::If"} and len(arns["Fn::If"]) == 3):
        return None
    _, with_grant, base = arns["Fn::If"]
    if not isinstance(base, list) or not isinstance(with_grant, dict) or set(with_grant) != {"Fn::Split"}:
        return None
    separator, joined = with_grant["Fn::Split"]
    if separator != "," or not isinstance(joined, dict) or set(joined) != {"Fn::Join"}:
        return None
    return base if joined["Fn::Join"] == [",", [*base, _AGENT_GRANT]] else None


def managed_policy_name(arn: Any) -> str:
    """The policy's name after ":policy/" in a literal ARN or a Sub one; "" for anything else."""
    text = arn.get("Fn::Sub") if isinstance(arn, dict) and set(arn) == {"Fn::Sub"} else arn
    return text.split(":policy/", 1)[-1] if isinstance(text, str) and ":iam::aws:policy/" in text else ""


def role_managed_problems(logical_id: str, arns: Any) -> list[str]:
    """A role may hold the managed policies SAM attaches itself (logs, tracing, event sources) and, through
    agent_grant_base's form, AgentPolicyArns; nothing else."""
    base = agent_grant_base(arns)
    return [
        f"{logical_id}: managed policy {arn!r} is not one SAM attaches itself"
        for arn in (base if base is not None else _as_list(arns))
        if managed_policy_name(arn) not in SAM_MANAGED_POLICIES
    ]


def agent_parameter_problems(tpl: dict[str, Any]) -> list[str]:
    """AgentPolicyArns, where the template has it: a list whose every element must be an IAM policy ARN (CloudFormation
    applies a CommaDelimitedList's AllowedPattern to each element), so the grant is a policy, never a role or "*"."""
    parameter = tpl.get("Parameters", {}).get(AGENT_POLICY_PARAMETER)
    if parameter is None:
        return []
    pattern = str(parameter.get("AllowedPattern", ".*"))
    problems = [] if parameter.get("Type") == "CommaDelimitedList" else [f"{AGENT_POLICY_PARAMETER}: not a CommaDelimitedList"]
    samples = {
        "": True, "arn:aws:iam::123456789012:policy/team/refunds": True, "arn:aws:iam::aws:policy/ReadOnlyAccess": True,
        "*": False, "arn:aws:iam::123456789012:role/admin": False, "arn:aws:s3:::bucket": False,
    }  # fmt: skip
    wrong = [value for value, allowed in samples.items() if bool(re.fullmatch(pattern, value)) != allowed]
    if wrong:
        problems.append(f"{AGENT_POLICY_PARAMETER}: AllowedPattern {pattern!r} is wrong about {wrong}")
    return problems


def model_parameter_problems(tpl: dict[str, Any]) -> list[str]:
    """ModelId and ModelGuardrail, where the template has them: the grants name their values, so neither may be a
    wildcard (IAM reads "*" and "?" in a resource ARN as wildcards) nor reach past the resource's id."""
    samples = {
        "ModelId": {
            "": True, "amazon.nova-lite-v1:0": True, "anthropic.claude-3-5-haiku-20241022-v1:0": True,
            "*": False, "amazon.*": False, "amazon.nova-lite-v1:?": False, "amazon.nova/x": False,
        },
        "ModelGuardrail": {"": True, "abc123def456:1": True, "abc123def456:DRAFT": True, "*": False, "*:1": False},
    }  # fmt: skip
    problems = []
    for name, cases in samples.items():
        parameter = tpl.get("Parameters", {}).get(name)
        if parameter is None:
            continue
        pattern = str(parameter.get("AllowedPattern", ".*"))
        wrong = [value for value, allowed in cases.items() if bool(re.fullmatch(pattern, value)) != allowed]
        if wrong:
            problems.append(f"{name}: AllowedPattern {pattern!r} is wrong about {wrong}")
    return problems


def statement_problems(statement: dict[str, Any], resources: set[str], where: str) -> list[str]:
    if statement.get("Effect") != "Allow":
        return []  # a Deny narrows; it never grants
    problems = []
    if "NotAction" in statement or "NotResource" in statement:
        problems.append(f"{where}: NotAction / NotResource grant more than they name")
    actions = [str(a) for a in _as_list(statement.get("Action", []))]
    for resource in _as_list(statement.get("Resource", [])):
        kind = scope(resource, resources)
        if kind == "any":
            wide = [a for a in actions if a not in STAR_ONLY_ACTIONS]
            if wide:
                problems.append(f"{where}: Resource \"*\" for {wide}, which AWS grants on narrower resources")
        elif kind == "foreign":
            problems.append(f"{where}: Resource {resource!r} is not one of the stack's own resources")
    return problems


def statements(document: Any) -> Iterator[dict[str, Any]]:
    if isinstance(document, dict):
        for statement in _as_list(document.get("Statement", [])):
            yield from _branches(statement)


def _branches(statement: Any) -> Iterator[dict[str, Any]]:
    """A statement, or each statement a conditional one (!If [cond, statement, AWS::NoValue]) may be."""
    if isinstance(statement, dict) and set(statement) == {"Fn::If"}:
        for branch in statement["Fn::If"][1:]:
            if branch != {"Ref": "AWS::NoValue"}:
                yield from _branches(branch)
    elif isinstance(statement, dict):
        yield statement


def policies_problems(policies: Any, resources: set[str], where: str) -> list[str]:
    """A SAM `Policies` value: managed policy names, policy templates, and inline documents ({Statement: …})."""
    problems = []
    for index, policy in enumerate(_as_list(policies or [])):
        at = f"{where}.Policies[{index}]"
        if isinstance(policy, str) or (isinstance(policy, dict) and set(policy) <= {"Ref", "Fn::Sub", "Fn::If"}):
            if not (isinstance(policy, str) and policy in ALLOWED_MANAGED_POLICIES):  # a Ref or Sub is a dict
                problems.append(f"{at}: managed policy {policy!r} (its grants are not this stack's to scope)")
        elif isinstance(policy, dict) and "Statement" in policy:
            for n, statement in enumerate(statements(policy)):
                problems += statement_problems(statement, resources, f"{at}.Statement[{n}]")
        elif isinstance(policy, dict) and len(policy) == 1:
            (name, args), = policy.items()
            if name not in SCOPED_POLICY_TEMPLATES:
                problems.append(f"{at}: policy template {name} is not one SAM scopes to a named resource")
                continue
            arg = (args or {}).get(SCOPED_POLICY_TEMPLATES[name])
            if scope(arg, resources) != "stack":
                problems.append(f"{at}: {name} {SCOPED_POLICY_TEMPLATES[name]} {arg!r} is not the stack's own")
        else:
            problems.append(f"{at}: unrecognised policy {policy!r}")
    return problems


def template_problems(tpl: dict[str, Any]) -> list[str]:
    """Every IAM grant the template writes: SAM functions' and state machines' Policies (and Globals'), and the
    policy documents of IAM resources and resource policies."""
    resources = set(tpl.get("Resources", {}))
    problems = agent_parameter_problems(tpl) + model_parameter_problems(tpl) + policies_problems(
        tpl.get("Globals", {}).get("Function", {}).get("Policies"), resources, "Globals.Function"
    )
    for logical_id, res in tpl.get("Resources", {}).items():
        kind, props = res.get("Type"), res.get("Properties") or {}
        if kind in _POLICY_OWNERS:
            problems += policies_problems(props.get("Policies"), resources, logical_id)
        elif kind in _POLICY_DOCUMENTS:
            if kind == "AWS::IAM::Role":
                problems += role_managed_problems(logical_id, props.get("ManagedPolicyArns", []))
                documents = [p.get("PolicyDocument") for p in props.get("Policies", [])]
            else:
                documents = [props.get("PolicyDocument")]
            for document in documents:
                for n, statement in enumerate(statements(document)):
                    problems += statement_problems(statement, resources, f"{logical_id}.Statement[{n}]")
    return problems


def transformed_problems(cfn: dict[str, Any]) -> list[str]:
    """The template as SAM transformed it: each generated role's inline policies (policy templates expanded) must
    pass the same check, and its managed policies be the ones SAM attaches for logs, tracing and event sources."""
    resources = set(cfn.get("Resources", {}))
    problems = []
    for logical_id, res in cfn["Resources"].items():
        if res.get("Type") != "AWS::IAM::Role":
            continue
        props = res.get("Properties") or {}
        problems += role_managed_problems(logical_id, props.get("ManagedPolicyArns", []))
        for policy in props.get("Policies", []):
            for n, statement in enumerate(statements(policy.get("PolicyDocument"))):
                problems += statement_problems(statement, resources, f"{logical_id}.{policy.get('PolicyName')}[{n}]")
    return problems



def _granted(statements: Iterator[dict[str, Any]]) -> set[str]:
    return {str(a) for s in statements if s.get("Effect") == "Allow" for a in _as_list(s.get("Action", []))}


def action_problems(role: str, granted: set[str]) -> list[str]:
    """Actions a role holds beyond ALLOWED_ACTIONS[role] (every action, for a role the table does not list)."""
    extra = sorted(granted - ALLOWED_ACTIONS.get(role, frozenset()))
    if not extra:
        return []
    known = "" if role in ALLOWED_ACTIONS else " (a role ALLOWED_ACTIONS does not list)"
    return [f"{role}: actions the code does not call: {extra}{known}"]


def template_actions(tpl: dict[str, Any]) -> dict[str, set[str]]:
    """Each role's granted actions as template.yaml writes them: a SAM function's or state machine's Policies
    (statements, and the policy templates POLICY_TEMPLATE_ACTIONS knows; any other template counts as its own
    name, which no allow-list holds) under "<logical id>Role", an AWS::IAM::Role's inline policies under its id."""
    roles: dict[str, set[str]] = {}
    for logical_id, res in tpl.get("Resources", {}).items():
        kind, props = res.get("Type"), res.get("Properties") or {}
        if kind in _POLICY_OWNERS:
            actions = roles.setdefault(f"{logical_id}Role", set())
            for policy in _as_list(props.get("Policies") or []):
                if isinstance(policy, dict) and "Statement" in policy:
                    actions |= _granted(statements(policy))
                elif isinstance(policy, dict) and len(policy) == 1:
                    name = next(iter(policy))
                    actions |= set(POLICY_TEMPLATE_ACTIONS.get(name, {f"{name} (policy template)"}))
        elif kind == "AWS::IAM::Role":
            actions = roles.setdefault(logical_id, set())
            for policy in props.get("Policies", []):
                actions |= _granted(statements(policy.get("PolicyDocument")))
    return roles


def template_action_problems(tpl: dict[str, Any]) -> list[str]:
    return [p for role, granted in template_actions(tpl).items() for p in action_problems(role, granted)]


def transformed_action_problems(cfn: dict[str, Any]) -> list[str]:
    """The same on the template as SAM transformed it (policy templates expanded into statements)."""
    problems = []
    for logical_id, res in cfn["Resources"].items():
        if res.get("Type") == "AWS::IAM::Role":
            policies = (res.get("Properties") or {}).get("Policies", [])
            granted = {a for p in policies for a in _granted(statements(p.get("PolicyDocument")))}
            problems += action_problems(logical_id, granted)
    return problems
