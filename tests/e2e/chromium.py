"""Headless Chromium for the console's browser tests: Debian's `chromium`, driven by Playwright for Python (its wheel
carries the driver; no browser is downloaded). Missing, it is installed with apt-get as root (as test_a2a_js.py
installs node), else the test fails saying what to install. Also: serving an ASGI app on loopback in a thread."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import uvicorn
from nylorun_local.aws import free_port

FLAGS = ["--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run"]  # fmt: skip


def find_chromium() -> str:
    found = shutil.which("chromium")
    if found is None and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for step in (["update", "-q"], ["install", "-y", "-q", "chromium"]):
            subprocess.run(["apt-get", *step], check=False, capture_output=True, env=env, timeout=540)
        found = shutil.which("chromium")
    if found is None:
        pytest.fail("the console's browser tests need Debian's chromium: apt-get install -y chromium (as root)")
    return found


@contextmanager
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the console's browser tests need Playwright for Python: pip install -e '.[dev]'")
    flags = FLAGS + (["--no-sandbox"] if os.geteuid() == 0 else [])
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=find_chromium(), args=flags, headless=True)
        try:
            yield launched
        finally:
            launched.close()


@contextmanager
def served(app: Any) -> Iterator[str]:
    """`app` on 127.0.0.1 in a thread; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
