"""A support lead's first week (issue 37): tables, customer search, one category per name, branding."""

from __future__ import annotations

import base64
import dataclasses
import re

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.config import Settings
from service.config_table import ConfigError
from service.db.engine import create_engine
from service.db.models import Article, MailOutbox, TicketCitation
from service.db.statistics import needs_analyze, refresh_statistics
from service.knowledge.articles import bulk_add_articles
from service.tickets.answering import above_floor
from service.tickets.workflow import answer_ticket
from service.web.help.markdown import render_answer, render_article

from .admin_helpers import csrf_from
from .test_tickets import make_chat  # noqa: F401 (a fixture)

PRICING = ("Our plans:\n\n| Plan | Requests per minute |\n|------|--------------------:|\n"
           "| Free | 60 |\n| Pro <script>x</script> | [600](javascript:alert(1)) |\n")


@pytest.fixture
def settings(settings):
    """The floor gate: these checks (the relevance floor, drafts' evidence) were written for the floor gate, and
    short questions such as "Password reset" are handed off by the calibrated one."""
    return dataclasses.replace(settings, answer_gate="floor")


def _add_article(client, title: str, content: str, category: str | None = None) -> int:
    response = client.post("/api/articles", json={"title": title, "content": content, "category": category})
    assert response.status_code == 201, response.get_json()
    return response.get_json()["article"]["id"]


def test_markdown_table_renders_as_a_table_with_the_same_escaping():
    html = str(render_article(PRICING))
    assert "<table>" in html and "<th>Plan</th>" in html and "<td>Free</td>" in html
    assert "| Plan |" not in html
    assert '<td class="align-right">60</td>' in html and "style=" not in html  # the CSP refuses inline styles
    assert "<script>" not in html and "&lt;script&gt;" in html and 'href="javascript' not in html


def test_answer_table_renders_as_a_table_and_keeps_links_on_site():
    html = str(render_answer("See [1].\n\n| Plan | Limit |\n|---|---|\n| Pro | [x](https://evil.example) 600 |",
                             {1: "/help/articles/3"}))
    assert "<table>" in html and "<td>Pro</td>" in html
    assert 'href="https:' not in html and '<a href="/help/articles/3">[1]</a>' in html


def test_help_article_page_shows_a_markdown_table(client, anonymous_client):
    article_id = _add_article(client, "Rate limits", PRICING, "API")
    html = anonymous_client.get(f"/help/articles/{article_id}").get_data(as_text=True)
    table = re.search(r"<table>.*?</table>", html, re.DOTALL)
    assert table is not None and "Requests per minute" in table.group(0) and "60" in table.group(0)


def _ticket(client, subject: str, email: str | None) -> int:
    body = {"subject": subject, "body": "The invoice total looks wrong this month."}
    response = client.post("/api/tickets", json=body | ({"email": email} if email else {}))
    assert response.status_code == 201, response.get_json()
    return response.get_json()["ticket"]["id"]


def _listed(client, **args: str) -> set[int]:
    response = client.get("/api/tickets", query_string=args | {"per_page": "100"})
    assert response.status_code == 200, response.get_json()
    return {ticket["id"] for ticket in response.get_json()["tickets"]}


def test_ticket_search_finds_a_customer_by_address_in_any_case(client):
    maria = {_ticket(client, "Invoice total", "maria@acme.example"),
             _ticket(client, "Second invoice", "Maria@Acme.example")}
    other = _ticket(client, "Invoice total", "joe@other.example")
    _ticket(client, "Invoice total", None)
    assert _listed(client, q="maria@acme.example") == maria
    assert _listed(client, q="MARIA@ACME.EXAMPLE") == maria
    assert _listed(client, q="@acme.example") == maria
    assert other in _listed(client, q="invoice")  # words still search subject and thread


def test_customer_filter_narrows_the_list_to_one_address(client):
    maria = _ticket(client, "Refund please", "maria@acme.example")
    _ticket(client, "Refund please", "joe@other.example")
    assert _listed(client, customer="Maria@acme.example") == {maria}
    assert _listed(client, customer="maria@acme.example", q="refund") == {maria}
    assert _listed(client, customer="nobody@acme.example") == set()


def test_customer_page_lists_every_ticket_of_one_address(client, admin_client):
    maria = [_ticket(client, "Invoice total", "maria@acme.example"), _ticket(client, "VAT id", "MARIA@acme.example")]
    joe = _ticket(client, "Invoice total", "joe@other.example")
    response = admin_client.get("/admin/inbox/customers/maria@acme.example")
    html = response.get_data(as_text=True)
    assert response.status_code == 200 and "Tickets from maria@acme.example" in html
    assert all(f'href="/admin/inbox/{ticket_id}"' in html for ticket_id in maria)
    assert f'href="/admin/inbox/{joe}"' not in html
    listing = admin_client.get("/admin/inbox?queue=all").get_data(as_text=True)
    assert 'href="/admin/inbox/customers/joe@other.example"' in listing


def test_billing_and_billing_are_one_category_in_the_api(client):
    first = _add_article(client, "Refunds", "How refunds work.", "Billing")
    second = _add_article(client, "Invoices", "Where invoices are.", "billing")
    third = _add_article(client, "VAT", "VAT ids on invoices.", " BILLING ")
    listed = client.get("/api/articles?per_page=100").get_json()["articles"]
    categories = {a["id"]: a["category"] for a in listed if a["id"] in (first, second, third)}
    assert set(categories.values()) == {"Billing"}
    by_filter = client.get("/api/articles?category=billing&per_page=100").get_json()["articles"]
    assert {a["id"] for a in by_filter} == {first, second, third}
    moved = client.patch(f"/api/articles/{second}", json={"category": "Other"}).get_json()["article"]
    back = client.patch(f"/api/articles/{second}", json={"category": "BILLING"}).get_json()["article"]
    assert moved["category"] == "Other" and back["category"] == "Billing"


def test_help_page_and_import_fold_categories_and_front_matter_wins(client, anonymous_client, runtime, tmp_path):
    from service.knowledge.importer import import_path

    (tmp_path / "billing").mkdir()
    (tmp_path / "billing" / "refunds.md").write_text("# Refunds\n\nMoney back within 30 days.")
    (tmp_path / "billing" / "moved.md").write_text("---\ncategory: Account\n---\n# Moved\n\nAn account page.")
    (tmp_path / "Billing").mkdir()
    (tmp_path / "Billing" / "plans.md").write_text("# Plans\n\n| Plan | Price |\n|---|---|\n| Pro | 9 |")
    with runtime.session() as session:
        report = import_path(session, runtime.embedder, tmp_path)
        session.commit()
    assert report.added == 3
    listed = client.get("/api/articles?per_page=100").get_json()["articles"]
    categories = {a["title"]: a["category"] for a in listed}
    assert categories["Moved"] == "Account"
    assert categories["Refunds"] == categories["Plans"] and categories["Refunds"].lower() == "billing"
    html = anonymous_client.get("/help/articles").get_data(as_text=True)
    assert len(re.findall(r">\s*billing\s*<", html, re.IGNORECASE)) == 1


def test_a_folder_display_name_becomes_the_category_and_updates_unchanged_files(runtime, tmp_path):
    from service.knowledge.importer import import_path

    folder = tmp_path / "billing"
    folder.mkdir()
    (folder / "refunds.md").write_text("# Refunds\n\nMoney back within 30 days.")
    with runtime.session() as session:
        import_path(session, runtime.embedder, tmp_path)
        (folder / "_category.txt").write_text("\nBilling & invoices\n")
        report = import_path(session, runtime.embedder, tmp_path)
        category = session.scalar(sa.select(Article.category).where(Article.title == "Refunds"))
    assert report.updated == 1 and report.added == 0
    assert category == "Billing & invoices"


def test_migration_folds_existing_case_duplicates_to_the_most_used_spelling(session):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parent.parent / "migrations" / "versions" / "0032_first_week.py"
    spec = importlib.util.spec_from_file_location("first_week_migration", path)
    migration = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(migration)
    session.execute(sa.text("ALTER TABLE knowledge_base DISABLE TRIGGER knowledge_base_fold_category"))
    for title, category in (("A", "billing"), ("B", "Billing"), ("C", "Billing"), ("D", "Account"), ("E", None)):
        session.add(Article(title=title, content=f"{title} text", category=category))
    session.flush()
    session.execute(sa.text(migration.FOLD_EXISTING))
    session.execute(sa.text("ALTER TABLE knowledge_base ENABLE TRIGGER knowledge_base_fold_category"))
    stored = dict(session.execute(sa.select(Article.title, Article.category)).all())
    assert stored == {"A": "Billing", "B": "Billing", "C": "Billing", "D": "Account", "E": None}


def _branded(runtime, **extra):
    runtime.settings = dataclasses.replace(runtime.settings, brand_name="Tallybook", **extra)
    return runtime


def test_help_center_shows_the_brand_name_instead_of_supportrag(runtime, anonymous_client):
    plain = anonymous_client.get("/help").get_data(as_text=True)
    assert "supportrag <span>help center</span>" in plain and "Tallybook" not in plain
    _branded(runtime)
    html = anonymous_client.get("/help").get_data(as_text=True)
    text = re.sub(r"<[^>]+>", "", html)
    assert "Tallybook" in text and "supportrag help center" not in text and "supportrag" not in html
    assert re.search(r"<title>[^<]*· Tallybook help center</title>", html)


def test_brand_colour_and_logo_are_served_to_the_help_center(runtime, anonymous_client, tmp_path):
    logo = tmp_path / "logo.png"
    logo.write_bytes(b"\x89PNG\r\n\x1a\n fake but served as is")
    assert anonymous_client.get("/help/brand/logo").status_code == 404
    _branded(runtime, brand_color="#0a7d5a", brand_logo=logo)
    html = anonymous_client.get("/help").get_data(as_text=True)
    assert 'href="/help/brand/style.css"' in html and 'src="/help/brand/logo"' in html
    css = anonymous_client.get("/help/brand/style.css")
    assert css.mimetype == "text/css" and "--accent: #0a7d5a" in css.get_data(as_text=True)
    with anonymous_client.get("/help/brand/logo") as served:
        assert served.status_code == 200 and served.mimetype == "image/png" and served.data == logo.read_bytes()


def test_brand_colour_must_be_hex():
    with pytest.raises(ConfigError):
        Settings.from_env({"SUPPORTRAG_BRAND_COLOR": "red; } body { display: none"})
    assert Settings.from_env({"SUPPORTRAG_BRAND_NAME": "Tallybook"}).brand.name == "Tallybook"


def test_customer_emails_are_signed_and_sent_from_the_brand(seeded, client):
    _branded(seeded, smtp_host="127.0.0.1", mail_from="support@tallybook.example")
    response = client.post("/api/tickets", json={"subject": "Parrot food", "email": "maria@acme.example",
                                                 "body": "Do you ship parrot food to Mars?"})
    ticket_id = response.get_json()["ticket"]["id"]
    with seeded.session() as session:
        row = session.scalars(sa.select(MailOutbox).where(MailOutbox.ticket_id == ticket_id)).one()
    assert row.body.rstrip().endswith("-- \nTallybook Support") and row.from_name == "Tallybook"


def test_the_docs_open_with_a_first_day_page_whose_screenshots_exist():
    from pathlib import Path

    import yaml

    root = Path(__file__).parent.parent
    nav = yaml.safe_load((root / "mkdocs.yml").read_text().replace("!!python", "#"))["nav"]
    assert nav[0] == {"Your first day": "first-day.md"}
    page = (root / "docs" / "first-day.md").read_text()
    for topic in ("supportrag import", "/help", "--role agent", "IMAP_HOST", "/admin/candidates"):
        assert topic in page
    images = re.findall(r"\]\((screenshots/[^)]+\.png)\)", page)
    assert len(images) >= 5 and all((root / "docs" / image).is_file() for image in images)


def test_labels_say_what_they_mean(client, admin_client, anonymous_client):
    dashboard = admin_client.get("/admin/dashboard").get_data(as_text=True)
    assert "Deflection" not in dashboard and "Self-service" in dashboard
    assert 'class="card total deflection"' not in dashboard  # no green for a rate of nothing
    listing = admin_client.get("/admin/inbox?queue=all").get_data(as_text=True)
    assert "Ticked:" not in listing and ">From<" not in listing and ">To<" not in listing
    assert "Created on or after" in listing and "Created on or before" in listing
    token = csrf_from(anonymous_client.get("/help").get_data(as_text=True))
    asked = anonymous_client.post("/help/ask", data={"csrf_token": token, "description": "Parrot food on Mars?"})
    ticket_page = anonymous_client.get(asked.headers["Location"]).get_data(as_text=True)
    escalated = anonymous_client.post(f"{asked.headers['Location']}/escalate",
                                      data={"csrf_token": csrf_from(ticket_page), "email": "maria@acme.example"})
    html = anonymous_client.get(escalated.headers["Location"]).get_data(as_text=True)
    assert "with a support agent" in html and "status-needs_agent" not in html


@pytest.mark.parametrize("written, planned, analyze", [
    (51, -1, True),  # never analyzed: any write past the base threshold
    (50, -1, False),
    (200, 1000, True),  # 50 + 10 % of 1,000 = 150
    (150, 1000, False),
    (16_000, 615, True),
    (1_000, 16_005, False),
])
def test_a_write_needs_analyze_past_autovacuums_threshold(written, planned, analyze):
    assert needs_analyze(written, planned) is analyze


def _planned_rows(connection, table: str) -> float:
    return connection.execute(sa.text("SELECT reltuples FROM pg_class WHERE oid = to_regclass(:t)"),
                              {"t": table}).scalar_one()


def test_a_bulk_write_into_an_empty_knowledge_base_analyzes_its_tables(migrated_database_url, local_embedder):
    engine = create_engine(migrated_database_url)
    try:
        with Session(engine) as session:
            assert _planned_rows(session, "knowledge_base") < 0  # never analyzed
            ids = bulk_add_articles(session, local_embedder,
                                    [{"title": f"Plan {n}", "content": f"Plan {n} allows {n} requests a minute."}
                                     for n in range(60)])
            session.commit()
        with engine.connect() as connection:
            assert len(ids) == 60
            assert _planned_rows(connection, "knowledge_base") == 60
            assert _planned_rows(connection, "knowledge_sections") >= 60
            assert _planned_rows(connection, "search_vectors") >= 120
    finally:
        engine.dispose()


def test_refresh_statistics_skips_small_writes(session):
    assert refresh_statistics(session, {"knowledge_base": 10, "knowledge_sections": 50}) == []
    assert refresh_statistics(session, {"knowledge_base": 10**9}) == ["knowledge_base"]


def test_the_agents_sent_attachment_shows_in_the_agents_thread(client, admin_client):
    ticket_id = _ticket(client, "Parrot food", "maria@acme.example")
    pdf = b"%PDF-1.4 invoice"
    reply = client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "See the invoice.", "attachments": [
        {"filename": "invoice-2026.pdf", "content_type": "application/pdf",
         "content_base64": base64.b64encode(pdf).decode()}]})
    assert reply.status_code == 201, reply.get_json()
    html = admin_client.get(f"/admin/inbox/{ticket_id}").get_data(as_text=True)
    link = re.search(r'href="(/api/tickets/\d+/attachments/\d+)" download>invoice-2026.pdf</a>', html)
    assert link is not None
    thread = html[html.index('id="thread-heading"'):html.index('id="composer"')]
    assert "invoice-2026.pdf" in thread and "See the invoice." in thread
    assert admin_client.get(link.group(1)).data == pdf


def test_the_canned_reply_picker_sits_above_the_composer(client, admin_client):
    created = admin_client.get("/admin/canned")
    assert created.status_code == 200
    ticket_id = _ticket(client, "Parrot food", "maria@acme.example")
    with_canned = admin_client.post("/admin/canned", data={
        "csrf_token": csrf_from(created.get_data(as_text=True)), "title": "Invoice copy",
        "body": "You can download every invoice under Account."})
    assert with_canned.status_code in (302, 303), with_canned.get_data(as_text=True)[:500]
    html = admin_client.get(f"/admin/inbox/{ticket_id}").get_data(as_text=True)
    assert html.index('id="canned-form"') < html.index('id="reply-body"') < html.index("Send, set pending")


def test_the_customers_other_tickets_match_the_address_in_any_case(client):
    first = _ticket(client, "Invoice total", "maria@acme.example")
    second = _ticket(client, "VAT id", "MARIA@acme.example")
    history = client.get(f"/api/tickets/{first}/history").get_json()["tickets"]
    assert [item["id"] for item in history] == [second]


@dataclasses.dataclass
class _Result:
    id: int
    similarity: float | None


@pytest.mark.parametrize("similarities, kept", [
    ([0.62, 0.18, 0.41], [0.62, 0.41]),  # a boosted unrelated article ranked second is not evidence
    ([0.62, None], [0.62, None]),  # no cosine (embedder down): nothing to judge by
    ([0.29], []),
    ([0.30], [0.30]),
])
def test_evidence_keeps_the_ranked_order_above_the_floor(similarities, kept):
    results = [_Result(n, s) for n, s in enumerate(similarities)]
    assert [r.similarity for r in above_floor(results, 0.30)] == kept


def test_the_workspace_folds_evidence_below_the_floor_and_the_draft_never_cites_it(seeded, client, admin_client):
    response = client.post("/api/articles", json={"title": "Volcano tours in Iceland", "importance": 2.0,
                                                  "content": "Our guided volcano hikes leave Reykjavik at dawn."})
    assert response.status_code == 201
    with seeded.session() as session:  # the seed articles' own boost off: the volcano's outranks them
        session.execute(sa.update(Article).where(Article.title != "Volcano tours in Iceland").values(importance=0))
    ticket_id = _ticket(client, "Password reset", "maria@acme.example")
    with seeded.session() as session:
        ranked = session.execute(sa.select(TicketCitation.article_title, TicketCitation.similarity)
                                 .where(TicketCitation.ticket_id == ticket_id)).all()
    below = [title for title, similarity in ranked if similarity is not None and similarity < 0.30]
    assert "Volcano tours in Iceland" in below, ranked  # ranked by the formula, but unrelated
    html = admin_client.get(f"/admin/inbox/{ticket_id}").get_data(as_text=True)
    folded = html[html.index('class="below-floor"'):html.index("</details>", html.index('class="below-floor"'))]
    assert all(title in folded for title in below)
    draft = client.post(f"/api/tickets/{ticket_id}/draft").get_json()
    assert draft["citations"] and not {c["title"] for c in draft["citations"]} & set(below)


def test_the_importance_page_shows_each_articles_progress_and_recount_says_what_it_counted(seeded, admin_client):
    from .test_learning import _record

    with seeded.session() as session:
        reset, refund = (session.scalar(sa.select(Article.id).where(Article.title == title))
                         for title in ("Reset your password", "How to request a refund"))
    _record(seeded, reset, ["q1", "q2", "q3"], solved=True)
    _record(seeded, refund, ["q4", "q5", "q6", "q7", "q8", "q9"], solved=True)
    page = admin_client.get("/admin/importance").get_data(as_text=True)
    progress = page[page.index('id="proposal-progress"'):]
    assert "Reset your password" in progress and "3 of 5 · 2 to go" in progress
    assert "6 of 5 · counted" in progress
    assert progress.index("How to request a refund") < progress.index("Reset your password")  # closest first
    recount = admin_client.post("/admin/importance/refresh", data={"csrf_token": csrf_from(page)},
                                follow_redirects=True).get_data(as_text=True)
    assert re.search(r"Recounted the last 30 days: 2 articles with outcomes, \d+ proposals? pending, "
                     r"1 still short of 5 outcomes\.", recount)


def test_the_language_model_never_sees_an_article_below_the_floor_and_ranks_keep_their_numbers(
        seeded, client, make_chat, fake_openai):
    response = client.post("/api/articles", json={"title": "Volcano tours in Iceland", "importance": 2.0,
                                                  "content": "Our guided volcano hikes leave Reykjavik at dawn."})
    assert response.status_code == 201
    with seeded.session() as session:
        session.execute(sa.update(Article).where(Article.title != "Volcano tours in Iceland").values(importance=0))
    fake_openai.state.chat_reply = "Use the Forgot password link [1]."
    ticket_id = answer_ticket(seeded, make_chat(), {"subject": "Password reset", "body": "Password reset please"})
    with seeded.session() as session:
        stored = session.execute(sa.select(TicketCitation.rank, TicketCitation.article_title, TicketCitation.cited)
                                 .where(TicketCitation.ticket_id == ticket_id).order_by(TicketCitation.rank)).all()
    assert any(title == "Volcano tours in Iceland" for _, title, _ in stored)  # still ranked and recorded
    [request] = fake_openai.chat_requests()
    prompt = "\n".join(message["content"] for message in request["body"]["messages"])
    assert "Volcano" not in prompt
    numbers = [int(n) for n in re.findall(r'<article number="(\d+)">', prompt)]
    assert numbers == [rank for rank, title, _ in stored if title != "Volcano tours in Iceland"][:len(numbers)]
    assert [title for _, title, cited in stored if cited] == [stored[0][1]]
