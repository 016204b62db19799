"""The embeddable chat widget beside web: loader, iframe page, SSE answers, visitor tokens, identity, locales."""
