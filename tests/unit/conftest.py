"""The unit tier runs on plain objects and the in-memory adapters: no moto, no HTTP server, no pollers.

When a run holds only tests from this folder (`make unit`), every test checks that nothing imported moto: a
test that needs AWS belongs in tests/integration."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

UNIT = Path(__file__).parent


@pytest.fixture(autouse=True)
def no_moto(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    unit_only = all(UNIT in Path(item.path).parents for item in request.session.items)
    if unit_only and "moto" in sys.modules:
        pytest.fail("moto was imported by the unit tier: unit tests use the in-memory adapters only")
