"""HTTP: the app factory, request helpers, error shape, access policy, API blueprints, admin and help pages.

Thin views that validate, call one use case and return. May import every domain package, never ``cli``.
"""
