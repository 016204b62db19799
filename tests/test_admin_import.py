"""The admin import page: upload markdown files through the browser form."""

from io import BytesIO

from .admin_helpers import csrf_from

REFUND_POLICY = b"""---
title: Store credit instead of a refund
category: Returns
importance: 1.4
---
You can choose store credit instead of a refund; it is issued within one business day.
"""


def _upload(client, files, category=""):
    html = client.get("/admin/import").get_data(as_text=True)
    data = {"csrf_token": csrf_from(html), "category": category,
            "files": [(BytesIO(content), name) for name, content in files]}
    return client.post("/admin/import", data=data, content_type="multipart/form-data")


def test_nav_links_to_the_import_page(admin_client):
    assert 'href="/admin/import"' in admin_client.get("/admin/articles").get_data(as_text=True)


def test_uploaded_markdown_becomes_an_embedded_article_and_a_reupload_is_skipped(admin_client, client):
    response = _upload(admin_client, [("store-credit.md", REFUND_POLICY), ("notes.txt", b"not markdown")])
    html = response.get_data(as_text=True)
    assert response.status_code == 200
    assert "Added 1, updated 0, unchanged 0, failed 1" in html
    articles = client.get("/api/articles").get_json()["articles"]
    assert [(a["title"], a["category"], a["importance"], a["embedding_status"]) for a in articles] == [
        ("Store credit instead of a refund", "Returns", 1.4, "embedded")]

    again = _upload(admin_client, [("store-credit.md", REFUND_POLICY)]).get_data(as_text=True)
    assert "Added 0, updated 0, unchanged 1, failed 0" in again
    assert client.get("/api/articles").get_json()["total"] == 1


def test_upload_without_csrf_token_is_refused_and_stores_nothing(admin_client, client):
    response = admin_client.post("/admin/import", data={"files": [(BytesIO(REFUND_POLICY), "a.md")]},
                                 content_type="multipart/form-data")
    assert response.status_code == 403
    assert client.get("/api/articles").get_json()["total"] == 0


def test_upload_with_no_file_says_so(admin_client):
    html = admin_client.get("/admin/import").get_data(as_text=True)
    response = admin_client.post("/admin/import", data={"csrf_token": csrf_from(html)},
                                 content_type="multipart/form-data")
    assert response.status_code == 400
    assert "Choose at least one markdown file." in response.get_data(as_text=True)


def test_anonymous_visitor_is_sent_to_login(anonymous_client):
    response = anonymous_client.get("/admin/import")
    assert response.status_code == 302 and "/admin/login" in response.headers["Location"]
