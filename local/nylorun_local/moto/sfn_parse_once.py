"""moto's Step Functions parses the state machine's definition (ANTLR, in Python) for every execution it starts.

Written for moto 5.2.5 (pinned in pyproject.toml). Only makes the local stand-in faster: 47 ms of CPU for
turn.asl.json, a third of a local turn alone, in the interpreter the api and moto share (bench/README.md, "The local
stand-in's patches"). The parse tree depends on the definition only: it is kept per definition, and each execution
still builds its own states from it (moto's preprocessor), so no execution shares state with another.
tests/integration/test_local_aws.py (each execution builds its own states) fails if moto's parser changes under it.
"""

from __future__ import annotations

import functools
from typing import Any

from nylorun_local.moto.patching import once, replace

# Definitions whose parse trees are kept: the stack's one state machine, and the few a test run makes.
_KEPT_DEFINITIONS = 32


@once
def install() -> None:
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
    from moto.stepfunctions.parser.asl.parse.preprocessor import Preprocessor

    original = AmazonStateLanguageParser.parse

    @functools.lru_cache(maxsize=_KEPT_DEFINITIONS)
    def tree(definition: str) -> Any:
        return original(definition)[1]  # a definition that does not parse raises, as before, and is not kept

    def parse(definition: str) -> tuple[Any, Any]:
        parsed = tree(definition)
        return Preprocessor().visit(parsed), parsed

    replace(__name__, AmazonStateLanguageParser, "parse", staticmethod(parse))
