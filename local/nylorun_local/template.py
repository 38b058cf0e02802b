"""Read template.yaml: the one source of truth for the names, keys and definitions the local Runtime creates.

The template, the functions' code and the state machine definitions travel with this package as `sam-stack/`: in the
repository its entries are symlinks to the top-level template.yaml, functions/ and statemachines/; a wheel holds
copies of them, so `nylorun serve` runs from an installed package too.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

STACK_ROOT = Path(__file__).parent / "sam-stack"  # the template's CodeUri and DefinitionUri are relative to it
TEMPLATE = STACK_ROOT / "template.yaml"


class _CfnLoader(yaml.SafeLoader):  # type: ignore[misc]
    """YAML with CloudFormation's short tags (!Ref, !Sub, !GetAtt, ...) read as their long forms."""


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    name = "Ref" if suffix == "Ref" else f"Fn::{suffix}"
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
        if suffix == "GetAtt" and isinstance(value, str):
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {name: value}


_CfnLoader.add_multi_constructor("!", _tag)


@lru_cache(maxsize=4)
def load_template(path: Path = TEMPLATE) -> dict[str, Any]:
    with path.open() as handle:
        return dict(yaml.load(handle, Loader=_CfnLoader))


def resource(logical_id: str, path: Path = TEMPLATE) -> dict[str, Any]:
    return dict(load_template(path)["Resources"][logical_id])


def properties(logical_id: str, path: Path = TEMPLATE) -> dict[str, Any]:
    return dict(resource(logical_id, path).get("Properties", {}))


def parameter_default(name: str, path: Path = TEMPLATE) -> Any:
    return load_template(path)["Parameters"][name].get("Default")


def timeout_seconds(logical_id: str, path: Path = TEMPLATE) -> int:
    """A function's Timeout (Globals' 30 when unset). A conditional one (TurnFunction's: 900 s with a ModelId, else
    300) is taken at its longer branch: the local Runtime may serve a model-backed Agent (`--model scripted`)."""
    value: Any = properties(logical_id, path).get("Timeout", 30)
    if isinstance(value, dict) and "Fn::If" in value:
        return max(int(branch) for branch in value["Fn::If"][1:])
    return int(value)
