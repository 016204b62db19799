import sqlalchemy as sa


def test_database_has_pgvector_0_7_or_newer(session):
    version = session.execute(sa.text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")).scalar_one()
    assert tuple(int(p) for p in version.split(".")[:2]) >= (0, 7)


def test_seed_inserts_five(seeded, session):
    assert session.execute(sa.text("SELECT count(*) FROM knowledge_base")).scalar_one() == 5
