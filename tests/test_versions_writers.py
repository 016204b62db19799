"""Every writer of an article makes a version with its author and source (issue 36), and the history page shows
a word-level diff and restores."""

from __future__ import annotations

import sqlalchemy as sa

from .admin_helpers import csrf_from
from .helpers import run_cli

VERSIONS_SQL = sa.text("SELECT number, author, source, content, importance FROM article_versions "
                       "WHERE article_id = :id ORDER BY number")


def _versions(session, article_id: int) -> list:
    session.expire_all()
    return [tuple(row) for row in session.execute(VERSIONS_SQL, {"id": article_id})]


def test_the_admin_pages_write_versions_as_the_admin_and_a_stale_form_is_refused(admin_client, session):
    page = admin_client.get("/admin/articles/new").get_data(as_text=True)
    created = admin_client.post("/admin/articles/new", data={
        "csrf_token": csrf_from(page), "title": "Shipping times", "content": "Parcels ship within two days.",
        "category": "", "importance": "1.0"})
    article_id = int(created.headers["Location"].rstrip("/").rsplit("/", 1)[1])
    page = admin_client.get(f"/admin/articles/{article_id}").get_data(as_text=True)
    assert 'name="version" value="1"' in page
    form = {"csrf_token": csrf_from(page), "title": "Shipping times", "category": "", "version": "1"}
    assert admin_client.post(f"/admin/articles/{article_id}",
                             data={**form, "content": "Parcels ship within one day."}).status_code == 302
    stale = admin_client.post(f"/admin/articles/{article_id}", data={**form, "content": "Parcels ship weekly."})
    assert stale.status_code == 409 and "someone changed this article" in stale.get_data(as_text=True)
    assert [(n, a, s) for n, a, s, _, _ in _versions(session, article_id)] == [
        (1, "admin:lead", "page"), (2, "admin:lead", "page")]


def test_the_history_page_diffs_two_versions_word_by_word_and_restores(admin_client, client, session):
    article_id = client.post("/api/articles", json={"title": "Returns", "content": "Returns are free for 30 days."}
                             ).get_json()["article"]["id"]
    client.patch(f"/api/articles/{article_id}", json={"content": "Returns are free for 60 days."})
    page = admin_client.get(f"/admin/articles/{article_id}/history?a=1&b=2").get_data(as_text=True)
    assert "<del>30</del><ins>60</ins>" in page
    restored = admin_client.post(f"/admin/articles/{article_id}/versions/1/restore",
                                 data={"csrf_token": csrf_from(page)})
    assert restored.status_code == 302
    assert _versions(session, article_id)[-1][1:4] == ("admin:lead", "restore", "Returns are free for 30 days.")


def test_an_approved_candidate_and_an_applied_proposal_are_versions_by_the_deciding_admin(client, session):
    session.execute(sa.text("INSERT INTO article_candidates (status, title, body, source, action) "
                            "VALUES ('pending', 'Gift wrap', 'We gift wrap for free.', 'template', 'new')"))
    candidate_id = session.execute(sa.text("SELECT max(id) FROM article_candidates")).scalar_one()
    session.commit()
    approved = client.post(f"/api/article-candidates/{candidate_id}/approve", json={})
    assert approved.status_code == 200, approved.get_data(as_text=True)
    article_id = approved.get_json()["article"]["id"]
    session.execute(sa.text("INSERT INTO importance_proposals (article_id, current_importance, proposed_importance, "
                            "evidence) VALUES (:id, 1.0, 1.4, '{}')"), {"id": article_id})
    proposal_id = session.execute(sa.text("SELECT max(id) FROM importance_proposals")).scalar_one()
    session.commit()
    assert client.post(f"/api/importance-proposals/{proposal_id}/apply").status_code == 200
    assert [(n, a, s, i) for n, a, s, _, i in _versions(session, article_id)] == [
        (1, "token:tests", "candidate", 1.0), (2, "token:tests", "proposal", 1.4)]


def test_the_cli_and_a_folder_import_write_versions_as_cli_and_importer(db_engine, tmp_path):
    run_cli("add", "--title", "Opening hours", "--content", "We open at nine.")
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "hours.md").write_text("# Weekend hours\n\nWe open at ten on Saturdays.\n")
    run_cli("import", folder)
    (folder / "hours.md").write_text("# Weekend hours\n\nWe open at eleven on Saturdays.\n")
    run_cli("import", folder)
    with db_engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT k.title, v.number, v.author, v.source FROM article_versions v "
                                    "JOIN knowledge_base k ON k.id = v.article_id WHERE v.source <> 'seed' "
                                    "ORDER BY k.id, v.number")).all()
        article_id = conn.execute(sa.text("SELECT id FROM knowledge_base WHERE title = 'Opening hours'")).scalar()
    run_cli("importance", "set", str(article_id), "1.5")
    assert [tuple(row) for row in rows] == [("Opening hours", 1, "cli", "cli"),
                                            ("Weekend hours", 1, "importer", "import"),
                                            ("Weekend hours", 2, "importer", "import")]
    with db_engine.connect() as conn:
        newest = conn.execute(sa.text("SELECT number, source FROM article_versions WHERE article_id = :id "
                                      "ORDER BY number DESC LIMIT 1"), {"id": article_id}).one()
    assert tuple(newest) == (2, "cli")


def test_the_ticket_page_links_each_citation_to_the_version_it_quoted(seeded, client, admin_client):
    ticket = client.post("/api/tickets", json={"subject": "Password", "body": "How do I reset my password?"})
    ticket_id = ticket.get_json()["ticket"]["id"]
    cited = ticket.get_json()["ticket"]["citations"][0]
    client.patch(f"/api/articles/{cited['article_id']}", json={"content": "Rewritten after the answer."})
    page = admin_client.get(f"/admin/tickets/{ticket_id}").get_data(as_text=True)
    assert f"/admin/articles/{cited['article_id']}/history?b=1" in page and "as of version 1" in page
