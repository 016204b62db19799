"""The card's half-precision copy follows ``knowledge_base.embedding`` whoever writes it (issue 27 item 4).

``embedding_half`` (0015) was written by the indexing use case beside ``embedding``, and a CHECK refused any row
where one was NULL without the other: ``UPDATE knowledge_base SET embedding = NULL WHERE …`` (how a DBA forces a
re-embed) failed, and a direct INSERT had to compute the half copy itself. A BEFORE trigger now derives it from
``embedding`` on every INSERT and every UPDATE that sets ``embedding``, ``embedding_half`` or ``embedding_model``:
NULL with a NULL embedding, else the first *width* dimensions of the padded vector, unit length, in half precision
(what the indexing use case writes, to the bit). 0016's statement triggers then copy it into ``search_vectors``, as
the section tables' copies already were (sections store their own width, so theirs needs no trigger).

The width is the model's, and the padded column does not carry it: the half copy the writer gave (or kept, for
the same model), else another card of the same model's (through ``knowledge_base_embedding_model``), else the
last non-zero coordinate of the padded vector (a first vector of a new model written by hand).

Revision ID: 0025
Revises: 0018
Create Date: 2026-12-02
"""

from alembic import op

revision = "0025"
down_revision = "0018"
branch_labels = None
depends_on = None

FUNCTION = """
CREATE FUNCTION knowledge_base_derive_half() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    width integer;
BEGIN
    IF NEW.embedding IS NULL THEN
        NEW.embedding_half := NULL;
        RETURN NEW;
    END IF;
    IF NEW.embedding_half IS NOT NULL AND (TG_OP = 'INSERT' OR NEW.embedding_half IS DISTINCT FROM OLD.embedding_half
                                           OR NEW.embedding_model IS NOT DISTINCT FROM OLD.embedding_model) THEN
        width := vector_dims(NEW.embedding_half);
    ELSE
        SELECT vector_dims(kb.embedding_half) INTO width FROM knowledge_base kb
        WHERE kb.embedding_model = NEW.embedding_model AND kb.embedding_half IS NOT NULL AND kb.id <> NEW.id
        LIMIT 1;
    END IF;
    IF width IS NULL THEN
        SELECT max(u.i) INTO width FROM unnest(NEW.embedding::real[]) WITH ORDINALITY AS u (v, i) WHERE u.v <> 0;
    END IF;
    NEW.embedding_half := l2_normalize(subvector(NEW.embedding, 1, coalesce(width, 1)))::halfvec;
    RETURN NEW;
END $$;
"""


def upgrade() -> None:
    op.execute(FUNCTION)
    op.execute("""CREATE TRIGGER knowledge_base_derive_half
                  BEFORE INSERT OR UPDATE OF embedding, embedding_half, embedding_model ON knowledge_base
                  FOR EACH ROW EXECUTE FUNCTION knowledge_base_derive_half()""")


def downgrade() -> None:
    op.execute("DROP TRIGGER knowledge_base_derive_half ON knowledge_base")
    op.execute("DROP FUNCTION knowledge_base_derive_half()")
