"""A support lead's first week: one category per name whatever its case, and customer lookups by address.

- Categories that differ only by case ("Billing", "billing") are folded into one: each takes the spelling most
  of its articles use (the oldest article breaks a tie). From then on a trigger gives a new or changed category
  the spelling already stored for it, whichever path writes it (API, import, admin page, candidates).
- ``lower(category)`` is indexed for that trigger and for the category filter; ``lower(customer_email)`` for the
  ticket list's customer search and filter and the customer page.

Revision ID: 0032
Revises: 0026
Create Date: 2026-12-06
"""

from alembic import op

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None

FOLD_EXISTING = """
UPDATE knowledge_base AS kb SET category = pick.category
FROM (
    SELECT DISTINCT ON (lower(category)) lower(category) AS folded, category
    FROM (SELECT category, count(*) AS articles, min(id) AS oldest
          FROM knowledge_base WHERE category IS NOT NULL GROUP BY category) AS spellings
    ORDER BY lower(category), articles DESC, oldest
) AS pick
WHERE lower(kb.category) = pick.folded AND kb.category <> pick.category
"""

# Any stored row will do: once folded, every row of a category has the same spelling (no ORDER BY, so a category
# of thousands of articles costs one index probe per write, not a sort).
FOLD_FUNCTION = """
CREATE FUNCTION knowledge_base_fold_category() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.category IS NOT NULL THEN
        NEW.category := coalesce((SELECT kb.category FROM knowledge_base AS kb
                                  WHERE lower(kb.category) = lower(NEW.category) AND kb.id <> NEW.id LIMIT 1),
                                 NEW.category);
    END IF;
    RETURN NEW;
END
$$
"""


def upgrade() -> None:
    op.execute("CREATE INDEX IF NOT EXISTS knowledge_base_category_lower ON knowledge_base (lower(category))")
    op.execute("CREATE INDEX IF NOT EXISTS tickets_customer_email_lower ON tickets (lower(customer_email))")
    op.execute(FOLD_EXISTING)
    op.execute(FOLD_FUNCTION)
    op.execute("""CREATE TRIGGER knowledge_base_fold_category BEFORE INSERT OR UPDATE OF category ON knowledge_base
                  FOR EACH ROW EXECUTE FUNCTION knowledge_base_fold_category()""")


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS knowledge_base_fold_category ON knowledge_base")
    op.execute("DROP FUNCTION IF EXISTS knowledge_base_fold_category()")
    op.execute("DROP INDEX IF EXISTS tickets_customer_email_lower")
    op.execute("DROP INDEX IF EXISTS knowledge_base_category_lower")
