"""The article history page in headless Chromium against a real `supportrag serve` (issue 36): a word-level diff
between two versions, and a restore that search follows at once."""

from __future__ import annotations

from .test_admin_browser import log_in, page, request_json, server  # noqa: F401 - fixtures

FIRST = "Parcels ship from our warehouse within two working days by tracked courier."
SECOND = "Parcels ship from our warehouse within five working days by tracked courier."


def test_admin_compares_two_versions_word_by_word_and_restores_the_first(page, server, screenshots):  # noqa: F811
    base_url, auth = server["base_url"], {"Authorization": f"Bearer {server['token']}"}
    _, created = request_json("POST", f"{base_url}/api/articles", {"title": "Shipping speed", "content": FIRST}, auth)
    article_id = created["article"]["id"]
    request_json("PATCH", f"{base_url}/api/articles/{article_id}", {"content": SECOND}, auth)
    log_in(page, base_url)
    page.goto(f"{base_url}/admin/articles/{article_id}")
    page.get_by_role("link", name="History").click()
    page.wait_for_url(f"{base_url}/admin/articles/{article_id}/history")
    diff = page.locator('pre.word-diff[data-field="content"]')
    assert diff.locator("del").all_inner_texts() == ["two"]
    assert diff.locator("ins").all_inner_texts() == ["five"]
    page.screenshot(path=str(screenshots / "admin-article-history.png"), full_page=True)

    page.locator('tr[data-version="1"]').get_by_role("button", name="Restore").click()
    page.get_by_text("Restored version 1 as version 3.").wait_for()
    _, article = request_json("GET", f"{base_url}/api/articles/{article_id}")
    assert article["article"]["content"] == FIRST
    _, found = request_json("POST", f"{base_url}/api/search", {"query": "parcels ship within two working days",
                                                               "limit": 1}, auth)
    assert found["results"][0]["id"] == article_id and "two working days" in found["results"][0]["snippet"]
