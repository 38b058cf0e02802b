"""moto's DynamoDB counts an attribute's replaced value, as well as its new one, against the 400 KB item limit.

Written for moto 5.2.5 (pinned in pyproject.toml). Fixes a real moto bug: DynamoDB limits the item as written, so
an update that replaces a large attribute with another is accepted there and refused by moto
(ItemSizeTooLargeException). The value replaced is taken out before the new one is counted.
tests/integration/test_moto_patches.py shows moto's behaviour without this patch, and says "moto fixed this: remove
the patch" when moto no longer has it.
"""

from __future__ import annotations

from typing import Any

from nylorun_local.moto.patching import once, replace


@once
def install() -> None:
    from moto.dynamodb.models.dynamo_type import LimitedSizeDict

    original_setitem = LimitedSizeDict.__setitem__

    def setitem(self: Any, key: str, value: Any) -> None:
        old = dict.pop(self, key, None)
        try:
            original_setitem(self, key, value)
        except Exception:
            if old is not None:
                dict.__setitem__(self, key, old)
            raise

    replace(__name__, LimitedSizeDict, "__setitem__", setitem)
