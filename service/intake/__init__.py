"""Inbound e-mail adapters (parse, match, store, pipe, webhook, IMAP): above service.tickets; may import service.mail (outbound), service.tickets, service.db and service.config, never service.web."""
