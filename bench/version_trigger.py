"""What the article-version and trash triggers (migration 0031) cost a bulk write: N articles inserted, updated and
deleted with the triggers, and again with those three disabled (every other trigger and cascade still runs), on a
fresh embedded PostgreSQL. Run by hand: ``.venv/bin/python bench/version_trigger.py --articles 20000``."""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

from service.db.embedded import start_embedded_server
from service.db.engine import create_engine
from service.db.migrate import upgrade_database

from benchlib import machine_facts, report

ISSUE_36_TRIGGERS = ("knowledge_base_next_version", "knowledge_base_record_version", "knowledge_base_to_trash")
STEPS = {
    "insert": "INSERT INTO knowledge_base (title, content) SELECT 'Article ' || n, repeat('word ', 200) || n "
              "FROM generate_series(1, :n) n",
    "update": "UPDATE knowledge_base SET content = content || ' changed'",
    "delete": "DELETE FROM knowledge_base",
}


def timed_run(engine: sa.Engine, articles: int, *, triggers: bool) -> dict[str, float]:
    """Seconds for each step, in one transaction rolled back at the end."""
    seconds = {}
    with engine.connect() as conn:
        if not triggers:  # DDL is transactional: the rollback below enables them again
            for name in ISSUE_36_TRIGGERS:
                conn.execute(sa.text(f"ALTER TABLE knowledge_base DISABLE TRIGGER {name}"))
        for name, sql in STEPS.items():
            start = time.perf_counter()
            conn.execute(sa.text(sql), {"n": articles})
            seconds[name] = round(time.perf_counter() - start, 3)
        conn.rollback()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--articles", type=int, default=20_000)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-versions-"))
    try:
        engine = create_engine(start_embedded_server(root / "pgdata", database="bench", delete_on_exit=True))
        upgrade_database(engine)
        timed_run(engine, 1000, triggers=True)  # warm up
        with_triggers = timed_run(engine, args.articles, triggers=True)
        without = timed_run(engine, args.articles, triggers=False)
        engine.dispose()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report(Path(__file__).with_suffix(".jsonl"), {"benchmark": "version_trigger", "articles": args.articles,
                                                  "with_triggers_s": with_triggers, "without_triggers_s": without,
                                                  **machine_facts()})


if __name__ == "__main__":
    main()
