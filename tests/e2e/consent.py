"""A person's browser connecting an account (docs/writing/connections.md): httpx with cookies, following the
Runtime's confirmation page, the example provider's consent page and its redirect back, as a browser does."""

from __future__ import annotations

import html
import re
from urllib.parse import urljoin

import httpx
from nylorun.domain.behalf import ON_BEHALF_HEADER, caller_scope

HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')
FORM = re.compile(r'<form method="post" action="([^"]+)">')


def submit(browser: httpx.Client, page: httpx.Response, **fields: str) -> httpx.Response:
    """Post the page's form with its hidden fields (and `fields`), following redirects."""
    action = FORM.search(page.text)
    assert action is not None, page.text
    data = {name: html.unescape(value) for name, value in HIDDEN.findall(page.text)} | fields
    return browser.post(urljoin(str(page.url), html.unescape(action[1])), data=data)


def connect(authorization_url: str, *, allow: bool = True, browser: httpx.Client | None = None) -> httpx.Response:
    """Open the authorizationUrl, press Connect, then Allow (or Deny) on the provider's page: the last page shown."""
    own = browser is None
    browser = browser or httpx.Client(follow_redirects=True, timeout=30)
    try:
        confirm = browser.get(authorization_url)
        assert confirm.status_code == 200, confirm.text
        provider_page = submit(browser, confirm)
        assert "Example Payments" in provider_page.text, provider_page.text
        return submit(browser, provider_page, decision="allow" if allow else "deny")
    finally:
        if own:
            browser.close()


def disconnect(
    base_url: str, token: str, agent: str = "support", provider: str = "payments", *, on_behalf_of: str | None = None
) -> None:
    """Revoke the subject's connection if it has one (connections outlive tasks: each test starts without). A
    delegating subject's (`token`) for its caller `on_behalf_of` (nylorun.domain.behalf) with that caller's scope."""
    headers = {"Authorization": f"Bearer {token}"}
    if on_behalf_of is not None:
        headers[ON_BEHALF_HEADER] = caller_scope(on_behalf_of)
    answer = httpx.delete(f"{base_url}/v1/a2a/connections/{agent}/{provider}", headers=headers, timeout=30)
    assert answer.status_code in (204, 404), answer.text
