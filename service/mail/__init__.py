"""Outbound e-mail: composing, queueing (the outbox), and the worker that sends it; below service.tickets.

May import service.db and service.config (the worker: service.runtime); never service.tickets, service.intake
or service.web. Inbound e-mail lives in service.intake.
"""
