"""A DBA's raw SQL on ``knowledge_base.embedding`` works, and search follows it (migration 0025, issue 27 item 4)."""

from __future__ import annotations

import numpy as np
import pytest
import sqlalchemy as sa

from service.providers.embeddings import embed_narrow

from .test_search_vectors import assert_in_step

QUESTION = "How do I pair my walkie-talkie with the charging dock?"
CARD_ROW_SQL = sa.text("""
SELECT kb.embedding_half IS NULL AS half_is_null, v.embedding_half::text AS copied, kb.embedding_half::text AS half
FROM knowledge_base kb LEFT JOIN search_vectors v ON v.article_id = kb.id AND v.section_id IS NULL
WHERE kb.id = :id
""")


def search_ids(client, query: str, limit: int = 5) -> list[int]:
    """The ids /api/search ranks for ``query``."""
    response = client.post("/api/search", json={"query": query, "limit": limit})
    assert response.status_code == 200, response.get_json()
    return [result["id"] for result in response.get_json()["results"]]


def padded(vector: np.ndarray) -> np.ndarray:
    """The article column's form: zero-padded to 1536."""
    return np.pad(vector, (0, 1536 - len(vector)))


def test_setting_the_embedding_to_null_by_raw_sql_drops_the_half_copy_and_the_article_from_search(
        client, runtime, seeded):
    with runtime.session() as session:
        password = session.execute(sa.text("SELECT id FROM knowledge_base WHERE title = 'Reset your password'")
                                   ).scalar_one()
        assert search_ids(client, "I forgot my password")[0] == password
        session.execute(sa.text("UPDATE knowledge_base SET embedding = NULL WHERE id = :id"), {"id": password})
        row = session.execute(CARD_ROW_SQL, {"id": password}).one()
        assert row.half_is_null and row.copied is None
        assert_in_step(session)
        session.commit()
    assert password not in search_ids(client, "I forgot my password", limit=10)


def test_a_raw_insert_and_a_raw_update_of_the_padded_embedding_are_searched_by_their_vectors(
        client, runtime, seeded):
    model = runtime.embedder.model_name
    dock, other = embed_narrow(runtime.embedder, [QUESTION, "Where do I download my invoices?"])
    with runtime.session() as session:
        article = session.execute(sa.text("""
            INSERT INTO knowledge_base (title, content, embedding, embedding_model)
            VALUES ('Pairing', 'Hold the button for five seconds.', CAST(:embedding AS vector(1536)), :model)
            RETURNING id"""), {"embedding": padded(dock), "model": model}).scalar_one()
        row = session.execute(CARD_ROW_SQL, {"id": article}).one()
        assert row.copied == row.half  # the half copy is derived, then copied into search_vectors
        width = session.execute(sa.text("SELECT vector_dims(embedding_half) FROM knowledge_base WHERE id = :id"),
                                {"id": article}).scalar_one()
        assert width == len(dock)
        assert_in_step(session)
        session.commit()
    response = client.post("/api/search", json={"query": QUESTION, "limit": 1}).get_json()["results"][0]
    assert response["id"] == article and response["similarity"] == pytest.approx(1.0, abs=2e-3)

    with runtime.session() as session:
        session.execute(sa.text("UPDATE knowledge_base SET embedding = CAST(:embedding AS vector(1536))"
                                " WHERE id = :id"), {"embedding": padded(other), "id": article})
        assert_in_step(session)
        session.commit()
    moved = client.post("/api/search", json={"query": "Where do I download my invoices?", "limit": 1}
                        ).get_json()["results"][0]
    assert moved["id"] == article and moved["similarity"] == pytest.approx(1.0, abs=2e-3)
