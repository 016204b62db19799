"""Article versions (issue 36): every writer makes one, the API lists, reads and restores them, edits are locked
optimistically, citations record the version they quoted, and the history page diffs word by word."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from service.knowledge.versions import word_diff

from .helpers import assert_error

V1 = ("To reset a forgotten password, open the sign-in page, choose Forgot password and follow the link we "
      "e-mail you within five minutes.")
V2 = ("Passwords are reset by the account owner from Settings, Security, Change password; the old one stops "
      "working at once.")
V3 = "Password resets now go through the help desk: write to us and an agent sends a one-time code by text message."


def _create(client, content: str = V1, title: str = "Resetting your password") -> dict:
    response = client.post("/api/articles", json={"title": title, "content": content, "category": "account"})
    assert response.status_code == 201, response.get_data(as_text=True)
    return response.get_json()["article"]


def test_three_versions_listed_newest_first_and_restoring_the_first_brings_back_its_text_in_search(client):
    article = _create(client)
    for content in (V2, V3):
        assert client.patch(f"/api/articles/{article['id']}", json={"content": content}).status_code == 200
    listing = client.get(f"/api/articles/{article['id']}/versions").get_json()
    assert [v["number"] for v in listing["versions"]] == [3, 2, 1]
    assert listing["current_version"] == 3
    assert {v["source"] for v in listing["versions"]} == {"api"}
    assert all(v["author"] == "token:tests" for v in listing["versions"])
    first = client.get(f"/api/articles/{article['id']}/versions/1").get_json()["version"]
    assert first["content"] == V1

    restored = client.post(f"/api/articles/{article['id']}/versions/1/restore")
    assert restored.status_code == 200, restored.get_data(as_text=True)
    assert restored.get_json()["article"]["content"] == V1
    assert restored.get_json()["article"]["version"] == 4
    assert client.get(f"/api/articles/{article['id']}").get_json()["article"]["content"] == V1
    top = client.post("/api/search", json={"query": "forgot password sign-in link e-mail", "limit": 1}).get_json()
    assert top["results"][0]["id"] == article["id"]
    assert top["results"][0]["snippet"] in V1
    newest = client.get(f"/api/articles/{article['id']}/versions").get_json()["versions"][0]
    assert (newest["number"], newest["source"]) == (4, "restore")


def test_an_unknown_version_or_article_is_a_404(client):
    article = _create(client)
    assert_error(client.get(f"/api/articles/{article['id']}/versions/9"), 404, "not_found")
    assert_error(client.post(f"/api/articles/{article['id']}/versions/9/restore"), 404, "not_found")
    assert_error(client.get("/api/articles/999999/versions"), 404, "not_found")


def test_two_editors_from_the_same_version_the_second_gets_409_with_the_current_and_nothing_is_lost(client):
    article = _create(client)
    first = client.patch(f"/api/articles/{article['id']}", json={"content": V2, "version": 1})
    assert first.status_code == 200 and first.get_json()["article"]["version"] == 2
    second = client.patch(f"/api/articles/{article['id']}", json={"content": V3, "version": 1})
    error = assert_error(second, 409, "version_conflict")
    assert error["details"]["current_version"] == 2
    assert error["details"]["article"]["content"] == V2
    retried = client.patch(f"/api/articles/{article['id']}", json={"content": V3, "version": 2})
    assert retried.status_code == 200
    texts = [client.get(f"/api/articles/{article['id']}/versions/{n}").get_json()["version"]["content"]
             for n in (1, 2, 3)]
    assert texts == [V1, V2, V3]


def test_a_version_that_is_not_a_whole_number_is_a_400(client):
    article = _create(client)
    assert_error(client.patch(f"/api/articles/{article['id']}", json={"content": V2, "version": "1"}), 400,
                 "validation_error")


def test_only_changes_to_what_customers_see_make_a_version(client, runtime):
    article = _create(client)
    client.patch(f"/api/articles/{article['id']}", json={"title": "Resetting your password"})  # unchanged
    with runtime.session() as session:  # a re-embed touches vectors and updated_at only
        session.execute(sa.text("UPDATE knowledge_base SET updated_at = now() WHERE id = :id"), {"id": article["id"]})
        session.commit()
    assert len(client.get(f"/api/articles/{article['id']}/versions").get_json()["versions"]) == 1
    client.patch(f"/api/articles/{article['id']}", json={"importance": 1.5})
    versions = client.get(f"/api/articles/{article['id']}/versions").get_json()["versions"]
    assert [(v["number"], v["importance"]) for v in versions] == [(2, 1.5), (1, 1.0)]


def test_a_citation_records_the_version_it_quoted(client, runtime):
    article = _create(client)
    client.patch(f"/api/articles/{article['id']}", json={"content": V1 + " Links expire after an hour."})
    ticket = client.post("/api/tickets", json={"subject": "forgot my password",
                                               "body": "How do I reset a forgotten password from the sign-in page?"})
    assert ticket.status_code == 201, ticket.get_data(as_text=True)
    with runtime.session() as session:
        rows = session.execute(sa.text("SELECT article_id, article_version FROM ticket_citations WHERE ticket_id = :t"),
                               {"t": ticket.get_json()["ticket"]["id"]}).all()
    assert (article["id"], 2) in [tuple(row) for row in rows]
    shown = client.get(f"/api/tickets/{ticket.get_json()['ticket']['id']}").get_json()["ticket"]["citations"]
    assert {"article_id": article["id"], "article_version": 2}.items() <= [c for c in shown
                                                                          if c["article_id"] == article["id"]][0].items()


@pytest.mark.parametrize("old, new, expected", [
    ("a b c", "a b c", [("same", "a b c")]),
    ("reset the password", "reset the passphrase", [("same", "reset the "), ("removed", "password"),
                                                    ("added", "passphrase")]),
    ("one two", "one two three", [("same", "one two"), ("added", " three")]),
    ("", "new", [("added", "new")]),
])
def test_word_diff_marks_whole_words_added_and_removed(old, new, expected):
    assert [(run["op"], run["text"]) for run in word_diff(old, new)] == expected
