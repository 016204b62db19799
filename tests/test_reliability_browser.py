"""Stored XSS: markup and script typed into articles and tickets come back as text in a real browser,
on every admin page that shows them, and nothing runs (the CSP would block inline script anyway)."""

from __future__ import annotations

from typing import Any

from .test_admin_browser import log_in, page, request_json, server  # noqa: F401  (fixtures)

TITLE = '<img src=x onerror="window.__xss = \'title\'">Gift <b>cards</b>'
CONTENT = "<script>window.__xss = 'content'</script>Check the balance under Account."
SUBJECT = "<svg onload=\"window.__xss = 'subject'\"></svg>Where is my refund?"
BODY = "</textarea><script>window.__xss = 'body'</script> I want a refund for my order"


def test_markup_stored_through_the_api_is_shown_as_text_and_never_runs(page, server):  # noqa: F811
    base, auth = server["base_url"], {"Authorization": f"Bearer {server['token']}"}
    status, created = request_json("POST", f"{base}/api/articles", {"title": TITLE, "content": CONTENT}, auth)
    assert status == 201
    article_id = created["article"]["id"]
    status, ticket = request_json("POST", f"{base}/api/tickets", {"subject": SUBJECT, "body": BODY})
    assert status == 201
    dialogs: list[Any] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))

    log_in(page, base)
    try:
        for path, shown in [("/admin/articles", TITLE),
                            (f"/admin/articles/{article_id}", TITLE), ("/admin/tickets", SUBJECT),
                            (f"/admin/tickets/{ticket['ticket']['id']}", BODY.strip())]:
            response = page.goto(f"{base}{path}")
            assert "script-src" not in response.headers["content-security-policy"]  # only 'self' scripts
            if shown:
                assert shown in page.locator("main").inner_text(), path
            assert page.evaluate("window.__xss") is None, path
        assert page.locator("main img[src=x], main script, main svg[onload]").count() == 0
        assert dialogs == []
    finally:
        request_json("DELETE", f"{base}/api/articles/{article_id}", None, auth)
