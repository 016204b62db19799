"""Outbound e-mail: compose, the outbox, transport (SMTP), delivery and its worker; below service.tickets.

May import service.db and service.config (the worker: service.runtime); never service.tickets, service.intake
or service.web. Inbound e-mail lives in service.intake.
"""
