"""moto's server redoes, for every request, work on values fixed while the process runs (method lists, snake-case names).

Written for moto 5.2.5 (pinned in pyproject.toml). Only makes the local stand-in faster (a profile of the
1,000-config push put a sixth of the moto process's interpreter here; bench/README.md, "The local stand-in's
patches"): each request lists its response class's methods (`inspect.getmembers`) to find the action's; each action
name, and each of a queue's attribute names, is turned into snake case character by character; and every message a
receive hands out reads the queue's whole attribute map three times over (`get_queue_attributes`) to check its
retention period. The method lists and the names are worked out once; the retention check reads the one attribute.
tests/integration/test_local_aws.py and the e2e tests (every request) fail if moto changes under it.
"""

from __future__ import annotations

import functools
import time
from typing import Any

from nylorun_local.moto.patching import once, replace


@once
def install() -> None:
    from moto.core import responses
    from moto.core.utils import camelcase_to_underscores, method_names_from_class
    from moto.sqs import models as sqs_models

    snake_case = functools.lru_cache(maxsize=4096)(camelcase_to_underscores)
    replace(__name__, responses, "camelcase_to_underscores", snake_case)  # the names each module calls
    replace(__name__, sqs_models, "camelcase_to_underscores", snake_case)
    # Keyed by class: the local stack's patches replace methods (same names) before the first request.
    replace(__name__, responses, "method_names_from_class", functools.cache(method_names_from_class))

    def retained(self: Any, queue_name: str, message: Any) -> bool:
        retention = int(self.get_queue(queue_name).message_retention_period)
        return bool(retention + message.sent_timestamp / 1000 > time.time())

    replace(__name__, sqs_models.SQSBackend, "is_message_valid_based_on_retention_period", retained)
