"""Outbound e-mail: compose, the outbox, transport (SMTP), delivery and its worker; below service.tickets.

May import service.db and service.config (and service.runtime for the worker); never service.tickets or
service.web. Inbound e-mail (service.mail.inbound, moving to service.intake) is the exception until it moves.
"""
