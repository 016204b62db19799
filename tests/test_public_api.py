"""The top-level Python API works with no setup call, on the database DATABASE_URL names.

It runs in a subprocess: the API builds one process-wide runtime from the environment, so a
fresh interpreter is the only honest way to show that nothing but the environment is needed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

REPO_ROOT = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent("""
    import json

    from service import add_knowledge_article, initialize_knowledge_base, search_articles
    from service.validation import ValidationError

    out = {}
    first = search_articles("I forgot my password")
    out["first_search"] = [result.title for result in first]
    out["initialize"] = initialize_knowledge_base()

    added = add_knowledge_article(
        "Gift card balance",
        "To check the balance left on a gift card, open Account > Gift cards and enter the card number "
        "and PIN printed on the back of the card. The remaining balance appears right away.",
        "Billing",
        importance=1.5,
    )
    out["added"] = {"id": added.id, "title": added.title, "category": added.category,
                    "importance": added.importance, "embedding_status": added.embedding_status,
                    "embedding_model": added.embedding_model}
    hits = search_articles("How much money is left on my gift card?", limit=2)
    out["gift_search"] = [{"id": r.id, "title": r.title, "importance": r.importance, "score": r.score,
                           "similarity": r.similarity, "relevance": r.relevance, "recency": r.recency} for r in hits]

    invalid_calls = {
        "empty_title": lambda: add_knowledge_article("", "Some content"),
        "importance_2.5": lambda: add_knowledge_article("Title", "Some content", importance=2.5),
        "empty_query": lambda: search_articles(""),
        "limit_0": lambda: search_articles("refund", limit=0),
    }
    out["errors"] = {}
    for name, call in invalid_calls.items():
        try:
            call()
            out["errors"][name] = None
        except ValidationError as exc:
            out["errors"][name] = sorted(exc.details)
    print(json.dumps(out))
""")


def plain_postgres_url(url: str) -> str:
    """The ``postgresql://`` form users put in DATABASE_URL (the service adds the psycopg driver itself)."""
    return sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def article_titles(conninfo: str) -> list[str]:
    """Every article title in the database behind ``conninfo``, in id order."""
    with psycopg.connect(conninfo) as conn:
        return [row[0] for row in conn.execute("SELECT title FROM knowledge_base ORDER BY id")]


def run_script(database_url: str, data_dir: Path) -> dict:
    """Run SCRIPT in a new interpreter configured only by environment variables; return its JSON output."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("EMBEDDING_", "SEARCH_", "SUPPORTRAG_", "DATABASE_URL"))}
    env.update(DATABASE_URL=database_url, SUPPORTRAG_DATA_DIR=str(data_dir))
    completed = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])


def count_articles(engine: sa.Engine) -> int:
    """How many articles the test database holds."""
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT count(*) FROM knowledge_base")).scalar_one()


SEED_TITLES = ["How to request a refund", "Payment methods accepted", "Track your order",
               "Reset your password", "Website not loading"]


def test_public_api_needs_no_setup_seeds_searches_adds_and_validates_on_the_configured_database(
        fresh_database_url, engine, tmp_path):
    database_url = plain_postgres_url(fresh_database_url)
    test_db_before = count_articles(engine)
    out = run_script(database_url, tmp_path)

    # The first call seeded the defaults by itself, so the password question finds its article.
    assert out["first_search"][0] == "Reset your password"
    assert len(out["first_search"]) == 3  # the default limit
    assert out["initialize"] == 0  # already seeded

    added = out["added"]
    assert isinstance(added["id"], int)
    assert added == {"id": added["id"], "title": "Gift card balance", "category": "Billing", "importance": 1.5,
                     "embedding_status": "embedded", "embedding_model": "local:all-MiniLM-L6-v2"}
    assert len(out["gift_search"]) == 2
    top = out["gift_search"][0]
    assert (top["id"], top["title"], top["importance"]) == (added["id"], "Gift card balance", 1.5)
    for hit in out["gift_search"]:
        # The default (vector) mode computes the card's formula on the cosine similarity.
        assert hit["score"] == pytest.approx(0.8 * hit["similarity"] + 0.2 * hit["recency"] * hit["importance"],
                                             abs=1e-12)

    assert out["errors"] == {
        "empty_title": ["title"],
        "importance_2.5": ["importance"],
        "empty_query": ["query"],
        "limit_0": ["limit"],
    }

    # Everything went to the configured database: seeds once plus the one added article ...
    assert article_titles(database_url) == [*SEED_TITLES, "Gift card balance"]
    # ... no embedded server was started under the data directory ...
    assert not (tmp_path / "pgdata").exists()
    # ... and the test process's own database was not touched.
    assert count_articles(engine) == test_db_before
