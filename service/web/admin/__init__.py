"""The /admin pages, their JSON helpers (ranking preview) and the markdown import page."""
