"""Similar solved tickets: solved only, best first, the asked ticket left out; HNSW (migration 0026) and the exact
scan agree, and the HNSW statement can use the index (its expression and predicate)."""

from __future__ import annotations

import numpy as np
import pytest
import sqlalchemy as sa
from pgvector import HalfVector

from service.retrieval.ticket_neighbours import (
    TicketNeighbour,
    build_ticket_index,
    find_similar_tickets,
    hnsw_statement,
    index_name,
)

MODEL = "local:all-MiniLM-L6-v2"


def unit(rng: np.random.Generator, width: int = 384) -> np.ndarray:
    vector = rng.standard_normal(width).astype(np.float32)
    return vector / np.linalg.norm(vector)


def add_ticket(session, vector: np.ndarray, *, solved: bool, model: str = MODEL) -> int:
    ticket_id = session.execute(sa.text(
        "INSERT INTO tickets (subject, body) VALUES ('s', 'b') RETURNING id")).scalar_one()
    session.execute(sa.text(
        "INSERT INTO ticket_vectors (ticket_id, embedding_model, embedding, solved_at) "
        "VALUES (:id, :model, :embedding, CASE WHEN :solved THEN now() END)"),
        {"id": ticket_id, "model": model, "embedding": HalfVector(vector), "solved": solved})
    return ticket_id


@pytest.fixture
def tickets(session):
    """Forty solved and ten open tickets with random unit vectors: (ids, vectors, solved flags)."""
    rng = np.random.default_rng(26)
    vectors = [unit(rng) for _ in range(50)]
    solved = [i % 5 != 0 for i in range(50)]
    ids = [add_ticket(session, vector, solved=flag) for vector, flag in zip(vectors, solved)]
    return ids, np.array(vectors), solved


def expected(ids, vectors, solved, query, *, limit: int, exclude: int | None = None) -> list[int]:
    """The brute-force answer in numpy (half precision, as stored)."""
    sims = vectors.astype(np.float16).astype(np.float32) @ query
    ranked = sorted((i for i in range(len(ids)) if solved[i] and ids[i] != exclude), key=lambda i: -sims[i])
    return [ids[i] for i in ranked[:limit]]


@pytest.mark.parametrize("exact_below", [10**9, 0], ids=["exact", "hnsw"])
def test_similar_tickets_are_solved_best_first_without_the_asked_one(session, tickets, exact_below):
    ids, vectors, solved = tickets
    query_index = 3  # a solved ticket asking for its neighbours
    found = find_similar_tickets(session, vectors[query_index], model=MODEL, limit=5,
                                 exclude_ticket_id=ids[query_index], exact_below=exact_below)
    assert [n.ticket_id for n in found] == expected(ids, vectors, solved, vectors[query_index], limit=5,
                                                    exclude=ids[query_index])
    assert all(isinstance(n, TicketNeighbour) for n in found)
    sims = [n.similarity for n in found]
    assert sims == sorted(sims, reverse=True)
    by_id = dict(zip(ids, vectors))
    assert sims[0] == pytest.approx(float(by_id[found[0].ticket_id] @ vectors[query_index]), abs=2e-3)


def test_a_solved_ticket_is_its_own_nearest_neighbour_unless_excluded(session, tickets):
    ids, vectors, _ = tickets
    found = find_similar_tickets(session, vectors[1], model=MODEL, limit=1)
    assert found[0].ticket_id == ids[1] and found[0].similarity == pytest.approx(1.0, abs=1e-3)
    assert find_similar_tickets(session, vectors[1], model=MODEL, limit=1, exclude_ticket_id=ids[1])[0].ticket_id \
        != ids[1]


def test_another_models_vectors_are_never_returned(session, tickets):
    ids, vectors, _ = tickets
    other = add_ticket(session, vectors[1], solved=True, model="openai:other")
    found = find_similar_tickets(session, vectors[1], model=MODEL, limit=50, exact_below=0)
    assert other not in {n.ticket_id for n in found} and len(found) == 40
    assert [n.ticket_id for n in find_similar_tickets(session, vectors[1], model="openai:other", limit=5)] == [other]


def test_nothing_is_returned_for_a_zero_vector_or_an_empty_limit(session, tickets):
    _, vectors, _ = tickets
    assert find_similar_tickets(session, np.zeros(384, dtype=np.float32), model=MODEL, limit=5) == []
    assert find_similar_tickets(session, vectors[0], model=MODEL, limit=0) == []


def test_the_hnsw_statement_can_read_the_migrated_index(session, tickets):
    _, vectors, _ = tickets
    session.execute(sa.text("SET LOCAL enable_seqscan = off"))  # a 50-row table: make the planner show its options
    plan = "\n".join(session.execute(sa.text(f"EXPLAIN {hnsw_statement(384).text}"), {
        "query": vectors[0], "model": MODEL, "exclude": -1, "limit": 10}).scalars())
    assert f"Index Scan using {index_name(384)}" in plan


def test_another_width_gets_its_own_index_from_build_ticket_index(session):
    rng = np.random.default_rng(5)
    vectors = [unit(rng, 8) for _ in range(6)]
    ids = [add_ticket(session, vector, solved=True, model="openai:tiny@8") for vector in vectors]
    assert build_ticket_index(session, 8) == "ticket_vectors_hnsw_8"
    definition = session.execute(sa.text("SELECT indexdef FROM pg_indexes WHERE indexname = 'ticket_vectors_hnsw_8'"
                                         )).scalar_one()
    assert "hnsw" in definition and "halfvec(8)" in definition and "solved_at IS NOT NULL" in definition
    session.execute(sa.text("ANALYZE ticket_vectors"))
    found = find_similar_tickets(session, vectors[2], model="openai:tiny@8", limit=3, exact_below=0)
    assert found[0].ticket_id == ids[2]
