"""E-mail: composing and queueing outgoing mail (the outbox), the worker that sends it, inbound parsing.

May import service.db, service.tickets and service.config; nothing here imports service.web.
"""
