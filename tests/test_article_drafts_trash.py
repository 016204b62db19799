"""Drafts and trash (issue 36): a draft is never searched nor cited until published; a deleted article is restored
with its history, and the sweep purges it after ARTICLE_TRASH_DAYS."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
import sqlalchemy as sa

from service.privacy.retention import run_retention
from service.web.requests import body_id

from .helpers import assert_error

SECRET_TEXT = ("Holiday returns: anything bought in December may be returned until the end of January for a full "
               "refund, no receipt needed.")
QUESTION = {"subject": "December returns", "body": "Can I return something I bought in December in January?"}


def test_a_draft_is_neither_searched_nor_cited_until_it_is_published(seeded, client, anonymous_client):
    created = client.post("/api/article-drafts", json={"title": "Holiday returns", "content": SECRET_TEXT})
    assert created.status_code == 201, created.get_data(as_text=True)
    draft = created.get_json()["draft"]
    query = {"query": "return a December purchase in January", "limit": 5}
    assert all(r["title"] != "Holiday returns" for r in client.post("/api/search", json=query).get_json()["results"])
    ticket = client.post("/api/tickets", json=QUESTION).get_json()["ticket"]
    assert ticket["citations"] and all(c["title"] != "Holiday returns" for c in ticket["citations"])
    assert SECRET_TEXT not in (ticket.get("answer") or "")
    assert "Holiday returns" not in anonymous_client.get("/api/articles").get_data(as_text=True)
    assert_error(anonymous_client.get("/api/article-drafts"), 401, "unauthorized")

    published = client.post(f"/api/article-drafts/{draft['id']}/publish")
    assert published.status_code == 200, published.get_data(as_text=True)
    article = published.get_json()["article"]
    assert client.post("/api/search", json=query).get_json()["results"][0]["id"] == article["id"]
    assert_error(client.get(f"/api/article-drafts/{draft['id']}"), 404, "not_found")


def test_a_draft_of_an_edit_publishes_as_a_version_or_409_if_the_article_moved_on(client):
    article = client.post("/api/articles", json={"title": "Returns", "content": "Returns within 30 days."}
                          ).get_json()["article"]
    draft = client.post("/api/article-drafts", json={"article_id": article["id"],
                                                     "content": "Returns within 60 days."}).get_json()["draft"]
    assert (draft["title"], draft["base_version"]) == ("Returns", 1)
    assert client.get(f"/api/articles/{article['id']}").get_json()["article"]["content"] == "Returns within 30 days."
    client.patch(f"/api/articles/{article['id']}", json={"content": "Returns within 45 days."})
    error = assert_error(client.post(f"/api/article-drafts/{draft['id']}/publish"), 409, "version_conflict")
    assert error["details"]["current_version"] == 2
    second = client.post("/api/article-drafts", json={"article_id": article["id"], "content": "Returns within 90 days."})
    published = client.post(f"/api/article-drafts/{second.get_json()['draft']['id']}/publish").get_json()["article"]
    assert (published["content"], published["version"]) == ("Returns within 90 days.", 3)


def test_a_deleted_article_is_restored_with_its_history_and_purged_after_the_trash_days(client, runtime, session):
    article = client.post("/api/articles", json={"title": "Gift cards", "content": SECRET_TEXT}).get_json()["article"]
    client.patch(f"/api/articles/{article['id']}", json={"importance": 1.5})
    assert client.delete(f"/api/articles/{article['id']}").status_code == 204
    [trashed] = client.get("/api/article-trash").get_json()["trash"]
    assert (trashed["id"], trashed["deleted_by"]) == (article["id"], "token:tests")
    query = {"query": "return a December purchase in January", "limit": 5}
    assert all(r["id"] != article["id"] for r in client.post("/api/search", json=query).get_json()["results"])

    restored = client.post(f"/api/article-trash/{article['id']}/restore")
    assert restored.status_code == 200, restored.get_data(as_text=True)
    assert restored.get_json()["article"]["version"] == 3
    versions = client.get(f"/api/articles/{article['id']}/versions").get_json()["versions"]
    assert [(v["number"], v["source"]) for v in versions] == [(3, "restore"), (2, "api"), (1, "api")]
    assert client.post("/api/search", json=query).get_json()["results"][0]["id"] == article["id"]
    assert client.get("/api/article-trash").get_json()["trash"] == []

    client.delete(f"/api/articles/{article['id']}")
    runtime.settings = dataclasses.replace(runtime.settings, article_trash_days=30)
    now = session.execute(sa.text("SELECT now()")).scalar_one()
    assert run_retention(runtime, now=now + timedelta(days=29)).articles == 0
    assert run_retention(runtime, now=now + timedelta(days=31)).articles == 1
    assert_error(client.post(f"/api/article-trash/{article['id']}/restore"), 404, "not_found")
    assert session.execute(sa.text("SELECT count(*) FROM article_versions WHERE article_id = :id"),
                           {"id": article["id"]}).scalar_one() == 0


def test_the_admin_pages_save_a_draft_publish_it_and_restore_from_the_trash(admin_client, client):
    from .admin_helpers import csrf_from

    page = admin_client.get("/admin/articles/new").get_data(as_text=True)
    assert "Save as draft" in page
    saved = admin_client.post("/admin/drafts/new", data={"csrf_token": csrf_from(page), "title": "Store hours",
                                                         "content": "Open nine to five.", "category": ""})
    assert saved.status_code == 302
    listing = admin_client.get("/admin/drafts").get_data(as_text=True)
    assert "Store hours" in listing and "new article" in listing
    assert client.get("/api/articles").get_json()["total"] == 0
    [draft] = client.get("/api/article-drafts").get_json()["drafts"]
    published = admin_client.post(f"/admin/drafts/{draft['id']}/publish", data={"csrf_token": csrf_from(listing)})
    article_id = int(published.headers["Location"].rstrip("/").rsplit("/", 1)[1])
    assert client.get(f"/api/articles/{article_id}").get_json()["article"]["content"] == "Open nine to five."
    page = admin_client.get(f"/admin/articles/{article_id}").get_data(as_text=True)
    admin_client.post(f"/admin/articles/{article_id}/delete", data={"csrf_token": csrf_from(page)})
    listing = admin_client.get("/admin/drafts").get_data(as_text=True)
    assert f'data-trashed="{article_id}"' in listing and "deleted by admin:lead" in listing
    restored = admin_client.post(f"/admin/trash/{article_id}/restore", data={"csrf_token": csrf_from(listing)})
    assert restored.status_code == 302
    assert client.get(f"/api/articles/{article_id}").get_json()["article"]["version"] == 2


def test_restoring_an_imported_article_whose_file_was_imported_again_keeps_both(client, runtime, session):
    session.execute(sa.text("INSERT INTO knowledge_base (title, content, source_path, source_sha256) "
                            "VALUES ('Old', 'Old text.', 'kb/a.md', 'x')"))
    old_id = session.execute(sa.text("SELECT id FROM knowledge_base WHERE source_path = 'kb/a.md'")).scalar_one()
    session.execute(sa.text("DELETE FROM knowledge_base WHERE id = :id"), {"id": old_id})  # plain SQL: trashed too
    session.execute(sa.text("INSERT INTO knowledge_base (title, content, source_path, source_sha256) "
                            "VALUES ('New', 'New text.', 'kb/a.md', 'y')"))
    session.commit()
    restored = client.post(f"/api/article-trash/{old_id}/restore")
    assert restored.status_code == 200, restored.get_data(as_text=True)
    assert session.execute(sa.text("SELECT count(*) FROM knowledge_base")).scalar_one() == 2


@pytest.mark.parametrize("value, expected", [(143, 143), (143.0, 143), (1, 1), (0, None), (-2, None), (1.5, None),
                                             (True, None), ("7", None), (None, None)])
def test_a_body_id_is_a_positive_whole_number_and_json_143_0_counts(value, expected):
    assert body_id(value) == expected
