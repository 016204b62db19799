"""Ranking (pure), the SQL that fetches candidates, search, evaluation. Imports db, providers, knowledge."""
