"""Issue 28 item 5: the core packages import without the web framework or the model runtime."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = {"flask", "torch", "sentence_transformers"}


def imported_modules(statement: str) -> set[str]:
    """Every module a fresh interpreter imports to run ``statement``, read from ``-X importtime``."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", statement], capture_output=True, text=True,
                          check=True)
    return {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines()
            if line.startswith("import time:") and "cumulative" not in line}


@pytest.mark.parametrize("module", ["service.retrieval.precision", "service.retrieval", "service.knowledge",
                                    "service.retrieval.search", "service.knowledge.articles"])
def test_importing_the_core_loads_neither_flask_nor_torch(module):
    loaded = imported_modules(f"import {module}")
    assert module in loaded  # the statement really ran and was traced
    assert sorted(name for name in loaded if name.split(".")[0] in HEAVY) == []


def test_the_public_api_names_still_import_from_the_package():
    from service import add_knowledge_article, answer_ticket, create_app, initialize_knowledge_base, search_articles
    from service.public import answer_ticket as defined
    from service.web.app import create_app as factory

    assert answer_ticket is defined and create_app is factory
    assert all(map(callable, (add_knowledge_article, search_articles, initialize_knowledge_base)))


def test_an_unknown_name_is_still_an_attribute_error():
    import service

    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        service.no_such_name  # noqa: B018
