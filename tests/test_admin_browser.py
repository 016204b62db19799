"""The admin pages in headless Chromium, against a real ``supportrag serve`` process on 127.0.0.1.

Uses an installed Chromium (never a downloaded browser; skipped with the reason when none is found, a failure
under CI). Screenshots go to artifacts/screenshots/, or to docs/screenshots/ (the README's copies) with
``SUPPORTRAG_SCREENSHOTS_DIR=docs/screenshots``.
"""

from __future__ import annotations

import gc
import json
import os
import urllib.error
import urllib.request
from typing import Any, Iterator

import pytest
from click.testing import CliRunner

from service.cli.main import main

from .test_serve import serve_fresh_database

USERNAME, PASSWORD = "lead", "correct horse battery"
DESKTOP, PHONE = {"width": 1280, "height": 800}, {"width": 390, "height": 844}
SAMPLE_TICKET = "I forgot my password and can't log in"
# 'Website not loading' ranks first for this one and 'Reset your password' second, within reach of a boost.
AMBIGUOUS_TICKET = "I can't log in to the website"
# Settings of the developer's shell that would change what the server does.
AUTH_OVERRIDES = ("SUPPORTRAG_SECRET_KEY", "SUPPORTRAG_PUBLIC_SEARCH", "SUPPORTRAG_PUBLIC_TICKETS",
                  "SUPPORTRAG_SECURE_COOKIES")


def request_json(method: str, url: str, body: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """One HTTP call; (status, parsed JSON) for successes and errors alike."""
    data = json.dumps(body).encode() if body is not None else None
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data, method=method, headers=all_headers),
                                    timeout=60) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())


def run_cli(env: dict[str, str], *args: str) -> str:
    """Run a ``supportrag`` command with ``env`` as its whole environment; its stdout.

    In this process, as tests/helpers.py's ``run_cli`` does: the served fixtures create their accounts and tokens
    this way, and a new interpreter for each (imports, model load) cost 1.5-2 s apiece.
    """
    unset = {name: None for name in os.environ if name not in env}
    result = CliRunner().invoke(main, list(args), env={**unset, **env})
    gc.collect()  # finalise anything the command left open here, so a leak fails the fixture that caused it
    assert result.exit_code == 0, f"exit {result.exit_code}\n{result.output}\n{result.exception!r}"
    return result.stdout


def create_admin_and_token(env: dict[str, str], base_url: str) -> str:
    """The browser tests' admin account (default auth settings) and an API token; returns the token."""
    for key in AUTH_OVERRIDES:
        env.pop(key, None)
    run_cli(env, "admin", "create", "--username", USERNAME, "--password", PASSWORD)
    return run_cli(env, "token", "create", "--name", "browser test").strip().splitlines()[-1]


@pytest.fixture(scope="module")
def server(pg_url, served_template, tmp_path_factory) -> Iterator[dict[str, str]]:
    """A fresh database with one admin and one API token, served by ``supportrag serve`` (gunicorn)."""
    with serve_fresh_database(pg_url, tmp_path_factory.mktemp("admin-browser"),
                              template=served_template, prepare=create_admin_and_token) as served:
        yield {"base_url": served["base_url"], "token": served["prepared"]}


@pytest.fixture
def page(browser) -> Iterator[Any]:
    """A fresh browser context (no cookies) at desktop size."""
    context = browser.new_context(viewport=DESKTOP)
    context.set_default_timeout(60_000)
    yield context.new_page()
    context.close()


def log_in(page, base_url: str) -> None:
    """Open an admin page, get sent to the login form, log in, land on the articles list."""
    page.goto(f"{base_url}/admin/articles")
    page.get_by_label("Username").fill(USERNAME)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base_url}/admin/articles")


def slider_x(box: dict[str, float], value: float, thumb_width: float = 16.0) -> float:
    """Where the thumb's centre sits for ``value`` on a 0–2 range input."""
    return box["x"] + thumb_width / 2 + (box["width"] - thumb_width) * value / 2.0


def article_id_by_title(base_url: str, title: str) -> int:
    """The id of the seeded article with that title (the article list is public)."""
    _, listing = request_json("GET", f"{base_url}/api/articles?per_page=100")
    return next(a["id"] for a in listing["articles"] if a["title"] == title)


def test_anonymous_visitor_is_sent_to_the_login_page(page, server):
    page.goto(f"{server['base_url']}/admin/articles")
    assert page.url == f"{server['base_url']}/admin/login?next=/admin/articles"
    assert page.get_by_role("heading", name="Log in").is_visible()


def test_api_write_without_a_token_is_401_and_with_the_cli_token_succeeds(server):
    url = f"{server['base_url']}/api/articles"
    body = {"title": "Browser test article", "content": "Made by the browser test."}
    status, answer = request_json("POST", url, body)
    assert (status, answer["error"]["code"]) == (401, "unauthorized")
    status, answer = request_json("POST", url, body, {"Authorization": f"Bearer {server['token']}"})
    assert status == 201
    status, _ = request_json("DELETE", f"{url}/{answer['article']['id']}", None,
                             {"Authorization": f"Bearer {server['token']}"})
    assert status == 204


def test_admin_drags_the_importance_slider_to_1_8_and_it_persists_and_ranks(page, server, screenshots):
    base_url = server["base_url"]
    log_in(page, base_url)
    page.screenshot(path=str(screenshots / "admin-articles.png"), full_page=True)

    page.get_by_role("link", name="Reset your password").click()
    article_id = article_id_by_title(base_url, "Reset your password")
    page.wait_for_url(f"{base_url}/admin/articles/{article_id}")
    slider = page.get_by_label("Importance (0.0 to 2.0)")
    assert float(slider.input_value()) == 1.0

    # A sample ticket first, so moving the slider shows the what-if before anything is saved.
    page.get_by_label("Sample ticket").fill(AMBIGUOUS_TICKET)
    page.get_by_role("button", name="Preview ranking").click()
    page.get_by_text("This article ranks #2 for this ticket").wait_for()

    box = slider.bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(slider_x(box, 1.0), y)
    page.mouse.down()
    page.mouse.move(slider_x(box, 1.8), y, steps=8)
    assert page.locator("#importance-value").text_content() == "1.8"
    assert "What if importance were 1.8 (not saved yet): rank #2 → #1" in page.locator(".whatif").text_content()
    assert page.locator(".preview-results li.result").first.get_attribute("data-article-id") == str(article_id)
    page.screenshot(path=str(screenshots / "admin-article.png"), full_page=True)
    page.mouse.up()
    page.get_by_text("Importance saved: 1.8 (was 1.0)").wait_for()
    assert page.locator("#importance-badge").text_content() == "critical"

    # Persisted: in the page after a reload, and in the API.
    page.reload()
    assert page.get_by_label("Importance (0.0 to 2.0)").input_value() == "1.8"
    status, shown = request_json("GET", f"{base_url}/api/articles/{article_id}")
    assert (status, shown["article"]["importance"]) == (200, 1.8)

    # The preview ranks with the saved importance: the same score /api/search gives.
    page.get_by_label("Sample ticket").fill(SAMPLE_TICKET)
    page.get_by_role("button", name="Preview ranking").click()
    row = page.locator(f'.preview-results li[data-article-id="{article_id}"]')
    row.wait_for()
    _, found = request_json("POST", f"{base_url}/api/search", {"query": SAMPLE_TICKET, "limit": 5})
    expected = next(r for r in found["results"] if r["id"] == article_id)
    assert expected["importance"] == 1.8
    assert row.locator(".score").text_content() == f"{expected['score']:.4f}"
    assert "importance 1.8" in row.locator(".breakdown").text_content()
    assert "This article ranks #1" in page.locator(".whatif").text_content()

    page.goto(f"{base_url}/admin/preview")
    page.get_by_label("Sample ticket").fill(SAMPLE_TICKET)
    page.get_by_role("button", name="Preview ranking").click()
    page.locator(".preview-results li.result").first.wait_for()
    page.screenshot(path=str(screenshots / "admin-preview.png"), full_page=True)


def test_slider_is_usable_with_the_keyboard_and_undo_restores_the_value(page, server):
    base_url = server["base_url"]
    log_in(page, base_url)
    article_id = article_id_by_title(base_url, "Payment methods accepted")
    page.goto(f"{base_url}/admin/articles/{article_id}")
    slider = page.get_by_label("Importance (0.0 to 2.0)")
    slider.focus()
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowLeft")
    page.get_by_text("Importance saved: 0.8 (was 1.0)").wait_for()
    page.get_by_role("button", name="Undo").click()
    page.get_by_text("Importance saved: 1.0 (was 0.8)").wait_for()
    assert float(slider.input_value()) == 1.0
    _, shown = request_json("GET", f"{base_url}/api/articles/{article_id}")
    assert shown["article"]["importance"] == 1.0


def test_form_post_without_a_csrf_token_is_refused(page, server):
    base_url = server["base_url"]
    log_in(page, base_url)
    article_id = article_id_by_title(base_url, "Website not loading")
    # Same browser cookies as the logged-in page, but no CSRF token: what a cross-site form would send.
    response = page.request.post(f"{base_url}/admin/articles/{article_id}/delete", form={"confirm": "yes"})
    assert response.status == 403
    status, _ = request_json("GET", f"{base_url}/api/articles/{article_id}")
    assert status == 200
    api = page.request.patch(f"{base_url}/api/articles/{article_id}", data={"importance": 0.1})
    assert (api.status, api.json()["error"]["code"]) == (403, "csrf_failed")


def test_pages_fit_a_phone_screen(browser, server, screenshots):
    base_url = server["base_url"]
    context = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True)
    try:
        phone = context.new_page()
        log_in(phone, base_url)
        for path in ("/admin/articles", f"/admin/articles/{article_id_by_title(base_url, 'Reset your password')}"):
            phone.goto(base_url + path)
            assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"], path
        assert phone.get_by_label("Importance (0.0 to 2.0)").is_visible()
        phone.screenshot(path=str(screenshots / "admin-article-phone.png"))
    finally:
        context.close()


# --- stored XSS: markup typed into articles and tickets comes back as text and never runs ---------------

XSS_TITLE = '<img src=x onerror="window.__xss = \'title\'">Gift <b>cards</b>'
XSS_CONTENT = "<script>window.__xss = 'content'</script>Check the balance under Account."
XSS_SUBJECT = "<svg onload=\"window.__xss = 'subject'\"></svg>Where is my refund?"
XSS_BODY = "</textarea><script>window.__xss = 'body'</script> I want a refund for my order"


def test_markup_stored_through_the_api_is_shown_as_text_and_never_runs(page, server):
    base, auth = server["base_url"], {"Authorization": f"Bearer {server['token']}"}
    status, created = request_json("POST", f"{base}/api/articles", {"title": XSS_TITLE, "content": XSS_CONTENT},
                                   auth)
    assert status == 201
    article_id = created["article"]["id"]
    status, ticket = request_json("POST", f"{base}/api/tickets", {"subject": XSS_SUBJECT, "body": XSS_BODY})
    assert status == 201
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))

    log_in(page, base)
    try:
        for path, shown in [("/admin/articles", XSS_TITLE), (f"/admin/articles/{article_id}", XSS_TITLE),
                            ("/admin/tickets", XSS_SUBJECT), (f"/admin/tickets/{ticket['ticket']['id']}",
                                                              XSS_BODY.strip())]:
            response = page.goto(f"{base}{path}")
            assert "script-src" not in response.headers["content-security-policy"]  # only 'self' scripts
            assert shown in page.locator("main").inner_text(), path
            assert page.evaluate("window.__xss") is None, path
        assert page.locator("main img[src=x], main script, main svg[onload]").count() == 0
        assert dialogs == []
    finally:
        request_json("DELETE", f"{base}/api/articles/{article_id}", None, auth)
