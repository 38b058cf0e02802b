"""The commands of docs/operate.md, run as tests/e2e/test_doc_commands.py runs every page's (a file of its own:
pytest-xdist gives it a worker of its own, beside the other pages)."""

import pytest
from doc_page_check import page_tests

pytestmark = pytest.mark.e2e

runtime, test_page_commands = page_tests(__file__)
