"""First-run seeding: the five default articles, exactly once per database, even under concurrent starts."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa
from alembic.script import ScriptDirectory

from service.db.migrate import alembic_config
from service.db.models import AppState, Article
from service.knowledge.articles import delete_article
from service.knowledge.seeding import SEEDED_KEY, seed_knowledge_base

# What seeds/articles/*.md declare in their front matter, in file order.
SEED_ARTICLES = [
    ("How to request a refund", "Returns"),
    ("Payment methods accepted", "Billing"),
    ("Track your order", "Shipping"),
    ("Reset your password", "Account"),
    ("Website not loading", "Technical"),
]


def article_rows(session) -> list[Article]:
    return list(session.scalars(sa.select(Article).order_by(Article.id)))


def seeded_markers(session) -> int:
    return session.execute(
        sa.select(sa.func.count()).select_from(AppState).where(AppState.key == SEEDED_KEY)).scalar_one()


def test_seeding_inserts_the_five_default_articles_and_one_marker(seeded, session):
    rows = article_rows(session)
    assert [(row.title, row.category) for row in rows] == SEED_ARTICLES
    assert all(row.importance == 1.0 for row in rows)
    assert all(row.embedding_model == seeded.embedder.model_name and row.content_sha256 for row in rows)
    word_counts = {row.title: len(row.content.split()) for row in rows}
    assert all(120 <= count <= 300 for count in word_counts.values()), word_counts
    # The front matter is metadata, not part of the stored text.
    assert not any(row.content.startswith("---") or "title:" in row.content for row in rows)
    assert seeded_markers(session) == 1
    assert session.get(AppState, SEEDED_KEY).value


def test_seeding_again_inserts_nothing(seeded, session):
    assert seeded.seed() == 0
    assert seed_knowledge_base(session, seeded.embedder) == 0
    assert len(article_rows(session)) == 5
    assert seeded_markers(session) == 1


def test_deleted_seed_articles_are_not_resurrected_by_seeding_again(seeded):
    with seeded.session() as session:
        refund = session.scalars(sa.select(Article).where(Article.title == "How to request a refund")).one()
        delete_article(session, refund.id)
    assert seeded.seed() == 0
    with seeded.session() as session:
        titles = [row.title for row in article_rows(session)]
        assert seed_knowledge_base(session, seeded.embedder) == 0
    assert sorted(titles) == sorted(title for title, _ in SEED_ARTICLES if title != "How to request a refund")

    with seeded.session() as session:  # an emptied knowledge base stays empty too
        session.execute(sa.delete(Article))
    assert seeded.seed() == 0
    with seeded.session() as session:
        assert article_rows(session) == []
        assert seeded_markers(session) == 1


# ---------------------------------------------------------------- the console script, across processes

def supportrag_script() -> str:
    """The installed console script of this interpreter's environment."""
    script = Path(sys.executable).parent / "supportrag"
    return str(script) if script.exists() else shutil.which("supportrag")


def seed_env(database_url: str, fake_openai, tmp_path: Path) -> dict[str, str]:
    """The process environment with only this test's settings (fake OpenAI at 384 dimensions)."""
    prefixes = ("EMBEDDING_", "SEARCH_", "SUPPORTRAG_", "DATABASE_URL")
    env = {key: value for key, value in os.environ.items() if not key.startswith(prefixes)}
    env.update({
        "DATABASE_URL": database_url,
        "EMBEDDING_BASE_URL": fake_openai.base_url,
        "EMBEDDING_API_KEY": "test",
        "EMBEDDING_DIMENSIONS": "384",
        "SUPPORTRAG_DATA_DIR": str(tmp_path / "data"),
    })
    return env


def database_facts(database_url: str) -> dict:
    """Row counts read straight from the database the processes used."""
    engine = sa.create_engine(database_url)
    try:
        with engine.connect() as conn:
            return {
                "articles": conn.execute(sa.text("SELECT count(*) FROM knowledge_base")).scalar_one(),
                "embedded": conn.execute(sa.text(
                    "SELECT count(*) FROM knowledge_base WHERE embedding IS NOT NULL "
                    "AND embedding_model = 'openai:text-embedding-3-small@384'")).scalar_one(),
                "titles": conn.execute(sa.text("SELECT title FROM knowledge_base ORDER BY id")).scalars().all(),
                "markers": conn.execute(sa.text(
                    "SELECT count(*) FROM app_state WHERE key = 'seeded_at'")).scalar_one(),
                "versions": conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars().all(),
            }
    finally:
        engine.dispose()


def test_four_concurrent_seed_commands_migrate_and_seed_exactly_once(fresh_database_url, fake_openai, tmp_path):
    env = seed_env(fresh_database_url, fake_openai, tmp_path)
    processes = [
        subprocess.Popen([supportrag_script(), "seed"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    outputs = []
    try:
        for process in processes:
            outputs.append(process.communicate(timeout=180))
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.communicate()
    for process, (stdout, stderr) in zip(processes, outputs):
        assert process.returncode == 0, f"stdout:\n{stdout}\nstderr:\n{stderr}"

    facts = database_facts(fresh_database_url)
    assert facts["articles"] == 5
    assert facts["embedded"] == 5
    assert sorted(facts["titles"]) == sorted(title for title, _ in SEED_ARTICLES)
    assert facts["markers"] == 1
    assert facts["versions"] == [ScriptDirectory.from_config(alembic_config()).get_current_head()]
    # Only the process that won the lock embedded: one request per seed article, none wasted.
    assert len(fake_openai.embedding_requests()) == 5


def test_seed_command_reports_the_articles_it_inserted(fresh_database_url, fake_openai, tmp_path):
    env = seed_env(fresh_database_url, fake_openai, tmp_path)
    first = subprocess.run([supportrag_script(), "seed"], env=env, capture_output=True, text=True, timeout=180)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "inserted 5 articles"
    second = subprocess.run([supportrag_script(), "seed"], env=env, capture_output=True, text=True, timeout=180)
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "already seeded; nothing inserted"
    assert database_facts(fresh_database_url)["articles"] == 5
