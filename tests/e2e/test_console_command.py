"""`nylorun console`: serves on 127.0.0.1, prints one URL with this run's key, and that URL opens a session."""

from __future__ import annotations

import re
import signal
import subprocess
import sys

import httpx
import pytest

pytestmark = pytest.mark.e2e


def test_nylorun_console_prints_a_loopback_url_with_a_key_that_opens_the_page() -> None:
    # Given: the console started as a person starts it
    console = subprocess.Popen(
        [sys.executable, "-m", "nylorun_client.command", "console", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert console.stdout is not None
        first = console.stdout.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+)/\?k=(\S+)", first)
        assert found, first
        base, key = found[1], found[2]
        # When
        without = httpx.get(base + "/")
        with httpx.Client(follow_redirects=True) as browser:  # keeps the session cookie, as a browser does
            opened = browser.get(f"{base}/?k={key}")
        # Then: without the key nothing; with it the page, under a self-only CSP
        assert without.status_code == 403
        assert opened.status_code == 200 and "Nylorun Console" in opened.text
        assert opened.headers["content-security-policy"].startswith("default-src 'self'")
    finally:
        console.send_signal(signal.SIGINT)
        console.wait(timeout=20)
    # And: ^C stops it cleanly
    assert console.returncode == 0
