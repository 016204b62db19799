"""SQL fragments every search statement shares (vector, lexical, hybrid, approximate), so they cannot drift apart."""

# The formula's recency of article ``kb`` at ``:now``: max(0, 1 − age/window), capped at 1 (future dates).
RECENCY = """LEAST(1.0, GREATEST(0.0,
               1.0 - EXTRACT(EPOCH FROM (:now - kb.created_at))::double precision / 86400.0 / :window_days))"""

# The articles search may return: embedded by the active model, under ``:source_prefix`` if one is given.
ELIGIBLE_WHERE = """kb.embedding IS NOT NULL AND kb.embedding_model = :model
      AND (CAST(:source_prefix AS text) IS NULL OR starts_with(kb.source_path, :source_prefix))"""
