"""The chat widget in headless Chromium: a plain host page on another port with the one tag, against a real
``supportrag serve`` (offline: extractive answers, streamed in pieces), using the accessible names only.

A second server runs with identity required and a streaming fake OpenAI-compatible model. axe-core comes from
tests/assets (a vendored copy of the npm package), injected by the test only.
"""

from __future__ import annotations

import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

from service.widget.identity import user_hash

from .fake_openai import FakeOpenAIServer
from .test_admin_browser import DESKTOP, PHONE, create_admin_and_token, log_in, request_json
from .test_serve import free_port, serve_fresh_database

AXE = Path(__file__).parent / "assets" / "axe-core" / "axe.min.js"
SECRET = "browser-identity-secret"
PASSWORD_QUESTION = "I didn't get the password reset email, even in spam"
FOLLOW_UP = "How long is the reset link valid?"
STREAM_REPLY = "Check your spam folder, then ask for a new reset link from the login page [1]."


class HostPages(ThreadingHTTPServer):
    """A customer's site on its own port: ``/`` has the tag (``?identity=none|good|wrong``), ``/foreign`` is a
    page that posts messages at the widget from its own origin."""

    daemon_threads = True

    def __init__(self, widget_base: str) -> None:
        self.widget_base = widget_base
        super().__init__(("127.0.0.1", free_port()), _HostHandler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def close(self) -> None:
        self.shutdown()
        self.server_close()


class _HostHandler(BaseHTTPRequestHandler):
    server: HostPages

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.startswith("/foreign"):
            page = """<!doctype html><title>Foreign</title><script>
              window.addEventListener("message", function (e) {
                if (e.data !== "attack") return;
                parent.postMessage({type: "supportrag:close"}, "*");
                for (var i = 0; i < parent.frames.length; i++) {
                  parent.frames[i].postMessage({type: "supportrag:identify",
                                                identity: {user_id: "intruder", user_hash: "x"}}, "*");
                }
              });</script>"""
        else:
            kind = re.search(r"identity=(\w+)", self.path)
            identify = ""
            if kind and kind.group(1) in ("good", "wrong"):
                digest = user_hash(SECRET if kind.group(1) == "good" else "guess", "user-7")
                identify = (f'<script>window.supportrag = function () {{ (window.supportrag.q = window.supportrag.q'
                            f' || []).push(arguments); }}; window.supportrag("identify", {{user_id: "user-7", '
                            f'user_hash: "{digest}", email: "seven@example.com"}});</script>')
            foreign = self.headers.get("X-Foreign-Frame", "")
            page = (f"<!doctype html><html lang='en'><head><meta name='viewport' content='width=device-width, initial-scale=1'><title>Shop</title></head><body><main><h1>Our shop</h1>"
                    f"<p>Welcome.</p>{foreign}</main>{identify}"
                    f'<script src="{self.server.widget_base}/widget.js" async data-locale="en"></script>'
                    f"</body></html>")
        data = page.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(scope="module")
def widget_site(pg_url, served_template, tmp_path_factory) -> Iterator[dict[str, Any]]:
    """``serve`` with one allowed host page; a second host page on another port that is not allowed."""
    allowed_port, foreign_port = free_port(), free_port()

    def prepare(env: dict[str, str], base_url: str) -> str:
        env["WIDGET_ALLOWED_ORIGINS"] = f"http://127.0.0.1:{allowed_port}"
        env["SUPPORTRAG_RATE_LIMIT_WIDGET"] = "200/minute"
        return create_admin_and_token(env, base_url)

    with serve_fresh_database(pg_url, tmp_path_factory.mktemp("widget"),
                              template=served_template, prepare=prepare) as served:
        host = _host_on(allowed_port, served["base_url"])
        foreign = _host_on(foreign_port, served["base_url"])
        try:
            yield {"base_url": served["base_url"], "token": served["prepared"], "host": host, "foreign": foreign}
        finally:
            host.close()
            foreign.close()


def _host_on(port: int, widget_base: str) -> HostPages:
    """HostPages on a port chosen before the server started (it is in the allow-list)."""
    class Pinned(HostPages):
        def __init__(self) -> None:
            self.widget_base = widget_base
            ThreadingHTTPServer.__init__(self, ("127.0.0.1", port), _HostHandler)
            threading.Thread(target=self.serve_forever, daemon=True).start()
    return Pinned()


@pytest.fixture
def context(browser):
    made = browser.new_context(viewport=DESKTOP, locale="en-US")
    made.set_default_timeout(30_000)
    yield made
    made.close()


def open_widget(page, url: str):
    """Load the host page, open the launcher; the panel's frame."""
    page.goto(url)
    page.get_by_role("button", name="Open support chat").click()
    page.get_by_title("Support chat").wait_for(state="visible")
    panel = page.frame_locator("iframe[title='Support chat']")
    panel.get_by_role("button", name="Send").wait_for()
    return panel


def wait_until_started(panel) -> None:
    """Until the visitor's session has started (Send is enabled); polled by Playwright, not by page script, which
    the frame's CSP forbids to evaluate strings."""
    from playwright.sync_api import expect  # imported where a browser runs, as conftest's browser fixture does

    expect(panel.get_by_role("button", name="Send")).to_be_enabled()


def send(panel, question: str) -> None:
    panel.get_by_label("Your question").fill(question)
    panel.get_by_role("button", name="Send").click()


def widget_frame(page):
    return next(f for f in page.frames if "/widget?" in f.url)


def test_a_visitor_gets_a_streamed_cited_answer_and_a_follow_up(context, widget_site, screenshots):
    page = context.new_page()
    panel = open_widget(page, widget_site["host"].origin)
    wait_until_started(panel)
    send(panel, PASSWORD_QUESTION)
    source = panel.locator(".message.assistant .sources a").first
    source.wait_for()
    assert source.text_content() == "[1] Reset your password › Didn't get the reset email?"
    assert re.fullmatch(rf"{widget_site['base_url']}/help/articles/\d+#didnt-get-the-reset-email",
                        source.get_attribute("href"))
    assert panel.locator(".message.assistant[data-answerable='yes']").count() == 1  # the gate event came first
    panel.get_by_text("Did this answer your question?").wait_for()
    page.screenshot(path=str(screenshots / "widget-1280.png"))
    send(panel, FOLLOW_UP)
    panel.locator(".message.assistant .sources").nth(1).wait_for()
    assert panel.locator(".message.visitor").count() == 2
    assert panel.get_by_text("Did this answer your question?").count() == 2


def test_talk_to_a_person_makes_a_ticket_and_the_agents_reply_appears_then_survives_a_reload(
        context, widget_site):
    page = context.new_page()
    panel = open_widget(page, widget_site["host"].origin)
    send(panel, PASSWORD_QUESTION)
    panel.locator(".sources a").first.wait_for()
    panel.get_by_label("Your e-mail").fill("ana@example.com")
    panel.get_by_role("button", name="Talk to a person").click()
    status = panel.get_by_role("status")
    status.filter(has_text=re.compile(r"T-\d+")).wait_for()
    ticket_id = int(re.search(r"T-(\d+)", status.text_content()).group(1))
    auth = {"Authorization": f"Bearer {widget_site['token']}"}
    code, listing = request_json("GET", f"{widget_site['base_url']}/api/tickets?queue=all", headers=auth)
    assert code == 200 and ticket_id in [t["id"] for t in listing["tickets"]]
    code, thread = request_json("GET", f"{widget_site['base_url']}/api/tickets/{ticket_id}/messages", headers=auth)
    assert PASSWORD_QUESTION in thread["messages"][0]["body"] and "Assistant: From our help article" in \
        thread["messages"][0]["body"]
    code, _ = request_json("POST", f"{widget_site['base_url']}/api/tickets/{ticket_id}/replies",
                           {"body": "Hello Ana, I have sent a fresh reset link."}, auth)
    assert code == 201
    panel.locator(".message.agent").get_by_text("Hello Ana, I have sent a fresh reset link.").wait_for()

    page.reload()  # the signed token brings the same conversation back, the agent's reply included
    page.get_by_role("button", name="Open support chat").click()
    reloaded = page.frame_locator("iframe[title='Support chat']")
    reloaded.locator(".message.agent").get_by_text("Hello Ana, I have sent a fresh reset link.").wait_for()
    assert reloaded.locator(".message.visitor").first.text_content().endswith(PASSWORD_QUESTION)


def test_an_unlisted_origin_cannot_frame_the_widget(context, widget_site):
    page = context.new_page()
    refused = []
    page.on("console", lambda message: refused.append(message.text) if "frame-ancestors" in message.text else None)
    page.goto(widget_site["foreign"].origin)
    page.get_by_role("button", name="Open support chat").click()
    page.wait_for_function("() => window.__supportragLoaded")
    page.wait_for_timeout(1500)
    assert page.frame_locator("iframe[title='Support chat']").get_by_label("Your question").count() == 0
    assert refused, "Chromium did not report the frame-ancestors refusal"


def test_a_foreign_origins_post_message_is_ignored(context, widget_site):
    page = context.new_page()
    foreign = f"<iframe title='Ad' src='{widget_site['foreign'].origin}/foreign'></iframe>"
    page.set_extra_http_headers({"X-Foreign-Frame": foreign})
    panel = open_widget(page, widget_site["host"].origin)
    frame = widget_frame(page)
    wait_until_started(panel)
    ad = next(f for f in page.frames if f.url.endswith("/foreign"))
    ad.evaluate("window.postMessage('attack', '*')")
    page.wait_for_timeout(700)
    assert page.get_by_title("Support chat").is_visible()  # the foreign "close" was ignored by the loader
    assert frame.evaluate("window.supportragWidget.state().identity") == ""  # and "identify" by the frame
    panel.get_by_label("Your question").press("Escape")  # the widget's own message does close it
    page.get_by_title("Support chat").wait_for(state="hidden")


def test_keyboard_only_focus_stays_in_the_panel_and_escape_returns_to_the_launcher(context, widget_site):
    page = context.new_page()
    page.goto(widget_site["host"].origin)
    launcher = page.get_by_role("button", name="Open support chat")
    launcher.focus()
    page.keyboard.press("Enter")
    panel = page.frame_locator("iframe[title='Support chat']")
    panel.get_by_role("button", name="Send").wait_for()
    wait_until_started(panel)
    panel.get_by_label("Your question").focus()
    for _ in range(12):  # round the panel twice: focus never leaves the frame
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.title") == "Support chat"
    page.keyboard.press("Escape")
    page.get_by_title("Support chat").wait_for(state="hidden")
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == "Open support chat"


def test_axe_finds_no_serious_violation_in_the_open_widget(browser, widget_site):
    if not AXE.exists():
        pytest.skip("axe-core is not in tests/assets/axe-core (npm pack axe-core)")
    # CSP bypass only here: the frame's policy would refuse the injected axe script.
    made = browser.new_context(viewport=DESKTOP, bypass_csp=True)
    try:
        page = made.new_page()
        panel = open_widget(page, widget_site["host"].origin)
        send(panel, PASSWORD_QUESTION)
        panel.locator(".sources a").first.wait_for()
        found = []
        for frame in (page.main_frame, widget_frame(page)):
            frame.add_script_tag(path=str(AXE))
            result = frame.evaluate("axe.run(document, {resultTypes: ['violations']})")
            found += [(v["id"], v["impact"]) for v in result["violations"] if v["impact"] in ("serious", "critical")]
        assert found == []
    finally:
        made.close()


def test_on_a_phone_the_panel_fills_the_screen_and_still_answers(browser, widget_site, screenshots):
    made = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    made.set_default_timeout(30_000)
    try:
        page = made.new_page()
        panel = open_widget(page, widget_site["host"].origin)
        box = page.get_by_title("Support chat").bounding_box()
        assert (box["x"], box["y"], box["width"], box["height"]) == (0, 0, PHONE["width"], PHONE["height"])
        send(panel, PASSWORD_QUESTION)
        panel.locator(".sources a").first.wait_for()
        assert panel.get_by_role("button", name="Talk to a person").is_visible()
        page.screenshot(path=str(screenshots / "widget-390.png"))
    finally:
        made.close()


@pytest.fixture(scope="module")
def strict_site(pg_url, served_template, tmp_path_factory) -> Iterator[dict[str, Any]]:
    """``serve`` with WIDGET_IDENTITY_REQUIRED=1 and a streaming fake model."""
    port = free_port()
    with FakeOpenAIServer() as model:
        model.state.chat_reply, model.state.stream_delay = STREAM_REPLY, 0.2

        def prepare(env: dict[str, str], base_url: str) -> None:
            env.update(WIDGET_ALLOWED_ORIGINS=f"http://127.0.0.1:{port}", WIDGET_IDENTITY_SECRET=SECRET,
                       WIDGET_IDENTITY_REQUIRED="1", LLM_BASE_URL=model.base_url, LLM_MODEL="fake-stream")

        with serve_fresh_database(pg_url, tmp_path_factory.mktemp("widget-strict"),
                                  template=served_template, prepare=prepare) as served:
            host = _host_on(port, served["base_url"])
            try:
                yield {"base_url": served["base_url"], "host": host, "model": model}
            finally:
                host.close()


@pytest.mark.parametrize("identity", ["none", "wrong"])
def test_identity_required_refuses_an_anonymous_or_wrongly_signed_visitor(context, strict_site, identity):
    page = context.new_page()
    with page.expect_response(lambda r: r.url.endswith("/widget/api/session")) as session:
        panel = open_widget(page, f"{strict_site['host'].origin}/?identity={identity}")
    assert session.value.status == 401
    status = panel.get_by_role("status").filter(has_text="Please sign in to chat with us.")
    status.wait_for()
    with page.expect_response(lambda r: r.url.endswith("/widget/api/ask")) as asked:
        send(panel, PASSWORD_QUESTION)
    assert asked.value.status == 401
    status.wait_for()
    assert panel.locator(".message.assistant:not(.greeting)").count() == 0  # no answer, no citation
    assert panel.locator(".sources a").count() == 0


def test_a_verified_user_gets_the_models_tokens_before_the_model_has_finished(context, strict_site):
    page = context.new_page()
    panel = open_widget(page, f"{strict_site['host'].origin}/?identity=good")
    wait_until_started(panel)
    finished = strict_site["model"].state.stream_finished_at
    before = len(finished)
    send(panel, PASSWORD_QUESTION)
    sent = time.perf_counter()
    panel.locator(".message.assistant .text").filter(has_text=re.compile(r"\w")).last.wait_for()
    first_text = time.perf_counter()
    panel.locator(".sources a").first.wait_for()
    assert len(finished) == before + 1 and first_text < finished[-1] - 1.0  # 15 words × 0.2 s still to come
    print(f"time to first token in the browser: {(first_text - sent) * 1000:.0f} ms")
    assert panel.locator(".message.assistant .text").last.text_content().strip() == STREAM_REPLY


def test_talk_to_a_person_first_asks_for_the_email_then_sends_with_it(context, widget_site):
    page = context.new_page()
    panel = open_widget(page, widget_site["host"].origin)
    wait_until_started(panel)
    panel.get_by_role("button", name="Talk to a person").click()
    panel.get_by_role("status").filter(has_text="Please enter your e-mail so a person can reply.").wait_for()
    assert panel.get_by_label("Your e-mail").evaluate("el => el === document.activeElement")
    panel.get_by_label("Your e-mail").fill("bo@example.com")
    panel.get_by_role("button", name="Send").click()  # with no question, Send finishes the hand-off
    panel.get_by_role("status").filter(has_text=re.compile(r"T-\d+")).wait_for()


def test_a_late_identify_with_the_right_hash_opens_the_chat_in_identity_required_mode(context, strict_site):
    page = context.new_page()
    panel = open_widget(page, f"{strict_site['host'].origin}/?identity=none")
    panel.get_by_role("status").filter(has_text="Please sign in to chat with us.").wait_for()
    page.evaluate("([id, hash]) => window.supportrag('identify', {user_id: id, user_hash: hash})",
                  ["user-8", user_hash(SECRET, "user-8")])
    panel.get_by_label("Your question").wait_for(state="visible")
    wait_until_started(panel)
    assert panel.get_by_role("button", name="Send").is_enabled()


def test_the_admin_page_shows_the_snippet_and_a_live_preview_that_answers(context, widget_site, screenshots):
    page = context.new_page()
    log_in(page, widget_site["base_url"])
    page.goto(f"{widget_site['base_url']}/admin/widget")
    assert page.get_by_label("Snippet to paste").input_value() == (
        f'<script src="{widget_site["base_url"]}/widget.js" async data-locale="en"></script>')
    assert page.locator("#allowed-origins").text_content().strip() == widget_site["host"].origin
    assert "not set" in page.locator("#identity-secret").text_content()
    page.get_by_role("button", name="Open support chat").click()
    panel = page.frame_locator("iframe[title='Support chat']")
    wait_until_started(panel)
    send(panel, PASSWORD_QUESTION)
    panel.locator(".sources a").first.wait_for()
    page.screenshot(path=str(screenshots / "admin-widget.png"))
