"""``search_vectors`` (migration 0016) holds exactly the base tables' vectors, whoever writes them."""

from datetime import UTC, datetime

import numpy as np
import sqlalchemy as sa

from service.knowledge.indexing import IndexInput, copy_sections, index_articles
from service.retrieval.ranking import RankingWeights
from service.retrieval.sql import search_by_vector

MODEL = "test-model"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

# What search_vectors must hold: every embedded card and section, as the scan reads it.
EXPECTED_SQL = sa.text("""
SELECT id AS article_id, NULL::bigint AS section_id, embedding_model, embedding_half::text FROM knowledge_base
WHERE embedding_half IS NOT NULL AND embedding_model IS NOT NULL
UNION ALL
SELECT article_id, id, embedding_model, (l2_normalize(embedding)::halfvec)::text FROM knowledge_sections
WHERE embedding IS NOT NULL AND embedding_model IS NOT NULL
ORDER BY 1, 2 NULLS FIRST
""")
STORED_SQL = sa.text("""
SELECT article_id, section_id, embedding_model, embedding_half::text FROM search_vectors ORDER BY 1, 2 NULLS FIRST
""")


def assert_in_step(session) -> int:
    """The side table equals what the base tables hold; how many vectors that is."""
    expected = session.execute(EXPECTED_SQL).all()
    assert session.execute(STORED_SQL).all() == expected
    return len(expected)


def unit_vectors(rng: np.random.Generator, count: int) -> np.ndarray:
    vectors = rng.standard_normal((count, 384)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def insert_article(session, vector, *, model: str | None = MODEL) -> int:
    return session.execute(sa.text("""
        INSERT INTO knowledge_base (title, content, embedding, embedding_half, embedding_model)
        VALUES ('t', 'c', CAST(:padded AS vector(1536)), CAST(l2_normalize(CAST(:vector AS vector)) AS halfvec),
                :model) RETURNING id
    """), {"padded": None if vector is None else np.pad(vector, (0, 1536 - len(vector))), "vector": vector,
           "model": model if vector is not None else None}).scalar_one()


def section_row(article_id: int, ordinal: int, vector, model: str | None = MODEL) -> dict:
    return {"article_id": article_id, "ordinal": ordinal, "heading_path": ["Part"], "content": "text",
            "char_start": 0, "char_end": 4, "kind": "text", "content_sha256": f"{article_id}-{ordinal}",
            "embedding": vector, "embedding_model": model if vector is not None else None}


def test_inserts_copies_updates_deletes_and_truncates_keep_the_side_table_in_step(session):
    rng = np.random.default_rng(3)
    vectors = unit_vectors(rng, 12)
    first, second, pending = (insert_article(session, vectors[0]), insert_article(session, vectors[1]),
                              insert_article(session, None))
    copy_sections(session, [section_row(first, 0, vectors[2]), section_row(first, 1, vectors[3]),
                            section_row(second, 0, vectors[4]), section_row(pending, 0, None)])
    assert assert_in_step(session) == 5

    session.execute(sa.text("UPDATE knowledge_base SET importance = 2.0"))  # no vector changes: nothing moves
    session.execute(sa.text("""
        UPDATE knowledge_base SET embedding = CAST(:padded AS vector(1536)), embedding_model = 'other-model',
               embedding_half = CAST(l2_normalize(CAST(:vector AS vector)) AS halfvec) WHERE id = :id
    """), {"padded": np.pad(vectors[5], (0, 1152)), "vector": vectors[5], "id": second})  # a re-embed
    session.execute(sa.text("UPDATE knowledge_sections SET embedding = :v WHERE article_id = :id AND ordinal = 1"),
                    {"v": vectors[6], "id": first})
    session.execute(sa.text("UPDATE knowledge_sections SET embedding = :v, embedding_model = 'm' "
                            "WHERE article_id = :id"), {"v": vectors[7], "id": pending})  # pending -> embedded
    session.execute(sa.text("UPDATE knowledge_base SET embedding = NULL, embedding_half = NULL, "
                            "embedding_model = NULL WHERE id = :id"), {"id": first})  # vector cleared
    assert assert_in_step(session) == 5

    session.execute(sa.text("DELETE FROM knowledge_sections WHERE article_id = :id AND ordinal = 0"), {"id": first})
    session.execute(sa.text("DELETE FROM knowledge_base WHERE id = :id"), {"id": second})  # FK cascade
    assert assert_in_step(session) == 2

    session.execute(sa.text("TRUNCATE knowledge_sections"))
    assert assert_in_step(session) == 0
    insert_article(session, vectors[8])
    session.execute(sa.text("TRUNCATE knowledge_base CASCADE"))
    assert assert_in_step(session) == 0


def test_the_indexing_use_case_and_a_reindex_keep_the_side_table_in_step(runtime):
    with runtime.sessions() as session:
        text = "Refunds\n\n## Card refunds\n\nFive working days.\n\n## Gift cards\n\nNever refunded."
        article_id = session.execute(sa.text(
            "INSERT INTO knowledge_base (title, content) VALUES ('Refunds', :c) RETURNING id"), {"c": text}
        ).scalar_one()
        embedder = runtime.embedder
        assert index_articles(session, embedder, [IndexInput(article_id, "Refunds", text)]) is None
        embedded = assert_in_step(session)
        assert embedded >= 3
        edited = text.replace("Five working days.", "Ten working days, or a voucher at once.")
        assert index_articles(session, embedder, [IndexInput(article_id, "Refunds", edited)]) is None
        assert assert_in_step(session) == embedded
        assert session.execute(sa.text("SELECT count(DISTINCT embedding_model) FROM search_vectors")).scalar_one() == 1


def test_ineligible_vectors_in_the_scan_never_take_or_shift_a_top_k_slot(session):
    """The scan reads every vector of the model; eligibility (the card's model, the source prefix) is the join
    after it. Better-matching ineligible articles must neither appear nor move the re-score threshold."""
    rng = np.random.default_rng(5)
    query = unit_vectors(rng, 1)[0]
    eligible = {}
    for index in range(30):
        vector = unit_vectors(rng, 1)[0] + (0.3 + 0.02 * index) * query
        vector /= np.linalg.norm(vector)
        if index % 3 == 0:  # under the prefix: eligible
            article_id = insert_article(session, vector)
            session.execute(sa.text("UPDATE knowledge_base SET source_path = :p WHERE id = :id"),
                            {"p": f"docs/{index}.md", "id": article_id})
            eligible[article_id] = float(vector @ query)
        elif index % 3 == 1:  # outside the prefix, closer to the query
            insert_article(session, (vector + query) / np.linalg.norm(vector + query))
        else:  # a pending card with a section equal to the query
            copy_sections(session, [section_row(insert_article(session, None), 0, query)])
    results = search_by_vector(session, query, model=MODEL, limit=5, weights=RankingWeights(), now=NOW,
                               source_prefix="docs/")
    by_score = sorted(eligible, key=lambda article_id: (-eligible[article_id], article_id))
    assert [r.id for r in results] == by_score[:5]  # equal recency and importance: the order of the cosines
    assert [r.vector_rank for r in results] == [1, 2, 3, 4, 5]
