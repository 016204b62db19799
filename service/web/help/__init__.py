"""The customer's help center under /help: ask, get an answer, mark it solved or reach an agent; public articles.

May import service.tickets, service.knowledge, service.retrieval (pure helpers) and service.web's request helpers.
"""
