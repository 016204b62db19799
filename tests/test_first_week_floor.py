"""Issue 37 leftovers: an extractive answer quotes only an article at or above the relevance floor (tickets and the
widget's stream), and an import that only updates articles analyzes the tables it moved."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.engine import create_engine
from service.db.models import Article, TicketAnswer, TicketCitation
from service.knowledge.importer import import_path
from service.tickets.answering import best_above_floor
from service.tickets.workflow import answer_ticket

from .helpers import run_cli
from .test_widget import ask, events_of, start, widget_app

FLOOR = 0.40  # the boosted article's cosine to QUESTION is about 0.32, "Reset your password"'s about 0.59
QUESTION = "can I change my account email"
BOOSTED = "Profile settings"


@dataclasses.dataclass
class _Result:
    similarity: float | None


@pytest.mark.parametrize("similarities, expected", [
    ([0.18, 0.62, 0.41], (2, 0.62)),  # a boosted rank-1 article below the floor is skipped, its rank kept
    ([0.62, 0.18], (1, 0.62)),
    ([None, 0.62], (1, None)),  # no cosine (embedder down): nothing to judge by
    ([0.29, 0.10], None),
    ([0.30], (1, 0.30)),
])
def test_the_quoted_article_is_the_best_ranked_at_or_above_the_floor(similarities, expected):
    found = best_above_floor([_Result(s) for s in similarities], 0.30)
    assert (found if found is None else (found[0], found[1].similarity)) == expected


@pytest.fixture
def boosted(seeded, client):
    """An unrelated article boosted to importance 2 that the formula ranks first for QUESTION; the seed articles'
    own boost off; the floor at FLOOR, gated by the floor alone."""
    response = client.post("/api/articles", json={
        "title": BOOSTED, "importance": 2.0,
        "content": "Update your display name, phone number and avatar on the profile page."})
    assert response.status_code == 201, response.get_json()
    with seeded.session() as session:
        session.execute(sa.update(Article).where(Article.title != BOOSTED).values(importance=0))
    seeded.settings = dataclasses.replace(seeded.settings, answer_gate="floor", answer_min_similarity=FLOOR)
    return seeded


def test_an_extractive_ticket_answer_never_quotes_a_rank_one_article_below_the_floor(boosted):
    ticket_id = answer_ticket(boosted, None, {"subject": QUESTION, "body": QUESTION})
    with boosted.session() as session:
        ranked = session.execute(sa.select(TicketCitation.rank, TicketCitation.article_title,
                                           TicketCitation.similarity, TicketCitation.cited)
                                 .where(TicketCitation.ticket_id == ticket_id).order_by(TicketCitation.rank)).all()
        answer = session.scalar(sa.select(TicketAnswer).where(TicketAnswer.ticket_id == ticket_id))
    assert ranked[0].article_title == BOOSTED and ranked[0].similarity < FLOOR, ranked  # the formula still ranks it
    [cited] = [row for row in ranked if row.cited]
    assert cited.article_title == "Reset your password" and cited.similarity >= FLOOR and cited.rank > 1
    assert answer.mode == "extractive" and "Reset your password" in answer.answer
    assert BOOSTED not in answer.answer and "avatar" not in answer.answer


def test_the_widgets_extractive_stream_never_quotes_a_rank_one_article_below_the_floor(boosted):
    client = widget_app(boosted).test_client()
    token = start(client).get_json()["token"]
    events = events_of(ask(client, token, QUESTION))
    assert events[0][1]["answerable"] is True
    text = "".join(data["text"] for kind, data in events if kind == "delta")
    assert text.startswith("From our help article “Reset your password”") and "avatar" not in text
    [citation] = events[-2][1]["citations"]
    assert citation["title"] == "Reset your password" and citation["number"] > 1


def test_the_widgets_model_never_sees_an_article_below_the_floor_and_cites_by_rank(boosted, fake_openai):
    fake_openai.state.chat_reply = "Change it under Account settings [2]."
    boosted.settings = dataclasses.replace(boosted.settings, llm_base_url=fake_openai.base_url, llm_model="fake")
    boosted.__dict__.pop("chat", None)  # the runtime's model is built from the settings just changed
    client = widget_app(boosted).test_client()
    events = events_of(ask(client, start(client).get_json()["token"], QUESTION))
    [request] = fake_openai.chat_requests()
    prompt = "\n".join(message["content"] for message in request["body"]["messages"])
    assert "avatar" not in prompt and '<article number="2">' in prompt and '<article number="1">' not in prompt
    [citation] = events[-2][1]["citations"]
    assert (citation["number"], citation["title"]) == (2, "Reset your password")


ARTICLES = 70  # past autovacuum's threshold (50 + 10 % of the rows) for a table of 70 articles


def _write_folder(folder: Path, count: int, version: str) -> None:
    folder.mkdir(exist_ok=True)
    for n in range(count):
        (folder / f"plan-{n}.md").write_text(f"# Plan {n}\n\nPlan {n} allows {n} requests a minute ({version}).\n")


def _analyze_count(engine: sa.Engine, table: str) -> int:
    """Manual ANALYZEs of ``table`` (autovacuum's own are counted apart, in autoanalyze_count)."""
    with engine.connect() as connection:
        return connection.execute(sa.text("SELECT analyze_count FROM pg_stat_user_tables WHERE relname = :t"),
                                  {"t": table}).scalar_one()


def _import(engine: sa.Engine, embedder, folder: Path):
    with Session(engine) as session:
        report = import_path(session, embedder, folder)
        session.commit()
    return report


def test_an_update_only_import_analyzes_when_it_moves_the_statistics_and_not_when_it_is_tiny(
        migrated_database_url, local_embedder, tmp_path):
    engine = create_engine(migrated_database_url)
    folder = tmp_path / "plans"
    try:
        _write_folder(folder, ARTICLES, "v1")
        assert _import(engine, local_embedder, folder).added == ARTICLES
        first = _analyze_count(engine, "knowledge_base")
        assert first >= 1  # the insert analyzed (issue 37's first half)
        _write_folder(folder, 3, "v2")  # three files changed: far below the threshold
        report = _import(engine, local_embedder, folder)
        assert (report.added, report.updated) == (0, 3)
        assert _analyze_count(engine, "knowledge_base") == first
        _write_folder(folder, ARTICLES, "v3")  # every file changed: an update-only import past the threshold
        report = _import(engine, local_embedder, folder)
        assert (report.added, report.updated) == (0, ARTICLES)
        assert _analyze_count(engine, "knowledge_base") == first + 1
        assert _analyze_count(engine, "knowledge_sections") >= 2
    finally:
        engine.dispose()


@pytest.mark.parametrize("stale, analyzed", [(ARTICLES, 1), (3, 0)])
def test_a_reembed_analyzes_when_it_rewrote_enough_vectors_to_move_the_statistics(
        cli_env, db_engine, tmp_path, stale, analyzed):
    folder = tmp_path / "plans"
    _write_folder(folder, ARTICLES, "v1")
    run_cli("import", folder)
    before = _analyze_count(db_engine, "search_vectors")
    with db_engine.begin() as connection:  # as after a model switch: these vectors are another model's
        connection.execute(sa.text("UPDATE knowledge_base SET embedding_model = 'old-model' WHERE id IN "
                                   "(SELECT id FROM knowledge_base ORDER BY id LIMIT :n)"), {"n": stale})
    assert f"re-embedded {stale} articles" in run_cli("reembed").stdout
    assert _analyze_count(db_engine, "search_vectors") == before + analyzed
    assert _analyze_count(db_engine, "knowledge_base") >= 1 + analyzed
