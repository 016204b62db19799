"""Storage: engine and pool (embedded server or DATABASE_URL), tables, migrations. Imports config only."""
