"""Writes the SnapStart variant of template.yaml: the api function published as alias `live`, with SnapStart on.

    .venv-sam/bin/python scripts/snapstart_template.py [template.yaml] [template-snapstart.yaml]  # make snapstart-template

A text edit, so template.yaml's comments and short-form tags (!Ref, !If, !Sub) stay exactly as written; each anchor
it edits must be found exactly once, so a change to template.yaml that moves one fails here, loudly, instead of
writing a variant without SnapStart. Why a variant and not a template parameter: docs/deploy.md "SnapStart".
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE, VARIANT = ROOT / "template.yaml", ROOT / "template-snapstart.yaml"
ALIAS = "live"

# Required (no Default): `sam deploy` without it fails before anything changes, so no deploy can forget it. SAM
# resolves AutoPublishCodeSha256's Ref to this value when it transforms the template and names the version
# `ApiFunctionVersion` + its first 10 characters, in place of any hash of the code or properties
# (https://docs.aws.amazon.com/serverless-application-model/latest/developerguide/sam-resource-function.html#sam-function-autopublishcodesha256;
# samtranslator LogicalIdGenerator.get_hash). So: a new value, a new version and a new snapshot; at most 10
# characters, or two values sharing their first 10 would name one version; letters and digits only, as a logical id.
PARAMETER = """\
  ApiVersionStamp:
    Type: String
    Description: "SnapStart variant only: any value that changes with every deploy (e.g. $(date +%s)); a new api \
function version, and so a new snapshot, is published when it changes"
    AllowedPattern: "^[A-Za-z0-9]{1,10}$"
    ConstraintDescription: "1 to 10 letters or digits, e.g. $(date +%s)"
"""

# SnapStart works only on published versions and the aliases that point at them, never on $LATEST
# (https://docs.aws.amazon.com/lambda/latest/dg/snapstart.html), so the function is published as an alias
# (https://docs.aws.amazon.com/serverless-application-model/latest/developerguide/sam-resource-function.html#sam-function-snapstart).
# No AutoPublishAliasAllProperties: with AutoPublishCodeSha256 SAM ignores the properties' hash, and without it SAM
# hashes parameter Refs unresolved, so a deploy that changed only a layer or a parameter value would publish nothing.
# The code is snapshot-safe: nylorun/snapshot.py re-seeds and re-reads after a restore
# (https://docs.aws.amazon.com/lambda/latest/dg/snapstart-runtime-hooks-python.html).
FUNCTION_PROPERTIES = f"""\
      AutoPublishAlias: {ALIAS}
      AutoPublishCodeSha256: !Ref ApiVersionStamp
      SnapStart:
        ApplyOn: PublishedVersions
"""


def _once(pattern: str, text: str, what: str) -> re.Match[str]:
    """The one match of `pattern` in `text`; fails naming `what` if there is none or more than one."""
    found = list(re.finditer(pattern, text, re.MULTILINE))
    if len(found) != 1:  # not an assert: `python -O` would drop it and write a variant without SnapStart
        raise ValueError(f"{what}: expected exactly one match of {pattern!r} in the template, found {len(found)}")
    return found[0]


def _resource(text: str, name: str) -> tuple[int, int]:
    """Where resource `name`'s block starts and ends: from `  Name:` to the next line indented two spaces or less."""
    start = _once(rf"^  {name}:\n", text, f"resource {name}").end()
    end = re.compile(r"^ {0,2}\S", re.MULTILINE).search(text, start)
    return start, end.start() if end else len(text)


def _edit_inside(text: str, name: str, pattern: str, replace: str, what: str) -> str:
    """`text` with the one match of `pattern` inside resource `name` replaced by `replace`."""
    start, end = _resource(text, name)
    match = _once(pattern, text[start:end], what)
    return text[: start + match.start()] + replace + text[start + match.end() :]


def snapstart_variant(text: str) -> str:
    """template.yaml's text with the parameter, the api function's alias and SnapStart, and the permission on it."""
    params = _once(r"^Parameters:\n", text, "the Parameters section").end()
    text = text[:params] + PARAMETER + text[params:]
    text = _edit_inside(
        text,
        "ApiFunction",
        r"^    Properties:\n",
        "    Properties:\n" + FUNCTION_PROPERTIES,
        "ApiFunction's Properties",
    )
    # The JSON-RPC route's own permission must name what the route invokes: SAM points the HttpApi events at the
    # alias, and a permission on the unqualified function does not cover an alias (its ARN has a qualifier).
    return _edit_inside(
        text,
        "RpcRoutePermission",
        r"^      FunctionName: !Ref ApiFunction\n",
        "      FunctionName: !Ref ApiFunction.Alias\n",
        "RpcRoutePermission's FunctionName",
    )


def main(argv: list[str]) -> int:
    source = Path(argv[0]) if argv else TEMPLATE
    target = Path(argv[1]) if len(argv) > 1 else VARIANT
    target.write_text(snapstart_variant(source.read_text()))
    print(
        f"{target}: {source.name} with SnapStart on the api function (alias {ALIAS}, parameter ApiVersionStamp)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
