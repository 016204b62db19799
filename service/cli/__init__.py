"""The ``supportrag`` console script (``main`` in ``main.py``): one module per command family, sharing ``context``.

May import every other package; nothing imports it.
"""
