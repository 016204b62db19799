"""Articles and their sections, seeding, markdown import. Imports db, providers and validation; never web or cli."""
