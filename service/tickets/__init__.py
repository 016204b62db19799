"""Grounded answers: answering (pure: gate, prompt, citations) and the ticket workflow. Imports retrieval and below."""
