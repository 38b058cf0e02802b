"""`make screenshots`: start `nylorun serve`, drive its console (/console) in headless Chromium through each main
screen, and write docs/images/console-*.png (shown in docs/console.md)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from nylorun_local.aws import free_port
from playwright.sync_api import Page, expect, sync_playwright

IMAGES = Path(__file__).resolve().parent.parent / "docs" / "images"
FLAGS = ["--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", *(["--no-sandbox"] if os.geteuid() == 0 else [])]  # fmt: skip


def start_runtime(port: int) -> tuple[subprocess.Popen[str], str]:
    serve = subprocess.Popen(
        [sys.executable, "-m", "nylorun_client.command", "serve", "--port", str(port), "--token", "tok-demo=demo"],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "NYLORUN_STATE_DIR": "/tmp/nylorun-screenshots"},
    )  # fmt: skip
    assert serve.stdout is not None
    for line in serve.stdout:
        if found := re.search(r"Console: (\S+)", line):
            return serve, found[1]
    raise SystemExit("nylorun serve printed no console URL")


def shot(page: Page, name: str, *, full_page: bool = True) -> None:
    page.screenshot(path=str(IMAGES / f"console-{name}.png"), full_page=full_page, timeout=20_000)
    print(f"wrote docs/images/console-{name}.png")


def walk(page: Page, url: str, base: str) -> None:
    page.goto(url)
    page.fill("#url", f"{base}/v1/a2a/agents/support")
    page.click("#connect-form button[type=submit]")
    page.locator("#converse").wait_for(state="visible")
    page.click("#card summary")  # the checks, open
    shot(page, "connect")
    page.click("#card summary")
    page.fill("#message", "I want a refund")
    page.press("#message", "Enter")
    question = page.locator("form.interaction.question")
    question.wait_for()
    shot(page, "question")
    question.locator("input").fill("A-1001")
    question.locator("button", has_text="Answer").click()
    page.locator("form.interaction.connection button", has_text="Connect").click()
    page.locator("form.interaction.approval").wait_for()
    shot(page, "approval")
    page.locator("form.interaction.approval button", has_text="Approve").click()
    expect(page.locator("#task-state")).to_have_text("COMPLETED", timeout=30_000)
    shot(page, "completed")
    page.click("#debug summary")
    page.locator("#exchanges li").nth(1).scroll_into_view_if_needed()  # a SendMessage, with A2A-Extensions
    shot(page, "debug", full_page=False)  # the drawer holds every exchange: one screen of it


def main() -> int:
    IMAGES.mkdir(parents=True, exist_ok=True)
    port = free_port()
    serve, url = start_runtime(port)
    base = f"http://127.0.0.1:{port}"
    try:
        with sync_playwright() as playwright:
            chromium = shutil.which("chromium")
            if chromium is None:
                raise SystemExit("make screenshots needs Debian's chromium: apt-get install -y chromium")
            browser = playwright.chromium.launch(executable_path=chromium, args=FLAGS)
            walk(browser.new_page(viewport={"width": 1200, "height": 900}), url, base)
            phone = browser.new_page(viewport={"width": 375, "height": 800})
            phone.goto(url)
            phone.fill("#url", f"{base}/v1/a2a/agents/orders")
            phone.click("#connect-form button[type=submit]")
            phone.locator("#converse").wait_for(state="visible")
            phone.fill("#message", "list my orders")
            phone.press("#message", "Enter")
            phone.locator("figure.component.table").wait_for()
            shot(phone, "orders-375px")
            browser.close()
    finally:
        serve.send_signal(signal.SIGINT)
        serve.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
