"""The embeddable chat widget: its blueprint (loader, iframe page, SSE answers), visitor tokens, identity, locales;
sits beside web (it uses web's error shape, limits and help links) and above tickets, whose use cases it calls."""
