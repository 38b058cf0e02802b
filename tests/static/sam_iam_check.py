"""Least privilege on the template as SAM transforms it (run by `make validate`, in SAM CLI's own venv).

SAM turns policy templates into statements and attaches managed policies of its own to the roles it generates;
neither is visible in template.yaml. This transforms the template offline (no AWS call: local CodeUri paths become
placeholder S3 URIs, as `sam validate` does) and runs iam_policy.transformed_problems (resources) and
transformed_action_problems (each role's actions against ALLOWED_ACTIONS) on the result.

    .venv-sam/bin/python tests/static/sam_iam_check.py [template.yaml]
    .venv-sam/bin/python tests/static/sam_iam_check.py --transformed [template.yaml]   # prints it as JSON
    .venv-sam/bin/python tests/static/sam_iam_check.py template-snapstart.yaml ApiVersionStamp=1  # parameter values
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from iam_policy import SAM_MANAGED_POLICIES, transformed_action_problems, transformed_problems


class _ManagedPolicies:
    """SAM asks for the ARNs of the managed policies it may attach; answer without calling IAM."""

    def load(self) -> dict[str, str]:
        names = {n.rsplit("/", 1)[-1]: n for n in SAM_MANAGED_POLICIES}
        return {short: f"arn:aws:iam::aws:policy/{path}" for short, path in names.items()}


def transformed(path: Path, parameters: dict[str, str] | None = None) -> dict[str, Any]:
    from samcli.yamlhelper import yaml_parse
    from samtranslator.translator.transform import transform

    tpl = yaml_parse(path.read_text())
    for res in tpl["Resources"].values():
        props = res.get("Properties") or {}
        for key in ("CodeUri", "ContentUri", "DefinitionUri"):
            if isinstance(props.get(key), str):
                props[key] = "s3://placeholder/" + props[key].strip("/")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    # Values SAM itself must resolve while transforming (the SnapStart variant's AutoPublishCodeSha256 Ref)
    return dict(transform(tpl, parameters or {}, _ManagedPolicies()))


def main() -> int:
    args = sys.argv[1:]
    dump = args[:1] == ["--transformed"]
    rest = args[1:] if dump else args
    paths = [a for a in rest if "=" not in a]
    path = Path(paths[0] if paths else "template.yaml")
    cfn = transformed(path, dict(a.split("=", 1) for a in rest if "=" in a))
    if dump:  # for the static tests, which run in the project's venv (no SAM translator there)
        print(json.dumps(cfn))
        return 0
    roles = {k: v for k, v in cfn["Resources"].items() if v["Type"] == "AWS::IAM::Role"}
    problems = transformed_problems(cfn) + transformed_action_problems(cfn)
    for problem in problems:
        print(f"least privilege: {problem}")
    statements = sum(len(p["PolicyDocument"]["Statement"]) for r in roles.values() for p in r["Properties"].get("Policies", []))
    print(f"{path}: {len(roles)} generated roles, {statements} statements: {'clean' if not problems else 'NOT clean'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
