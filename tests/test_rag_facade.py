"""The seed project's ``RAG`` facade, tested as its old documentation described it.

``RAG(knowledge_dir="knowledge")`` loads a folder's ``.md`` files (relative to the current directory, or
absolute); ``rag.corpus`` lists them as {"source", "content"}; ``rag.retrieve(query, limit=3)`` returns the
contents of the best matching ones, ``[]`` when nothing matches or the folder is missing or empty.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from service.knowledge.importer import import_path
from service.rag import RAG, format_advisory_context

REPO_ROOT = Path(__file__).resolve().parent.parent

RESET = "Click Forgot password on the sign-in page and follow the link we email you to choose a new password."
CHANGE = "Signed in? Open Account > Security and pick a new password; you stay signed in on this device."
RULES = "Passwords need at least 12 characters, including a number and a symbol."
REFUNDS = "# Refunds\n\nReturn an item within 30 days of delivery and we refund the original payment method."
DELIVERY = "Standard delivery takes 3-5 business days; express delivery arrives the next business day."
FILES = {
    "reset-password.md": f"---\ntitle: Reset your password\ncategory: Account\n---\n\n{RESET}",
    "account/change-password.md": f"# Change your password\n\n{CHANGE}",
    "account/password-rules.md": f"---\ntitle: Password requirements\n---\n{RULES}",
    "refunds.md": REFUNDS,
    "shipping/delivery-times.markdown": DELIVERY,
}
CONTENTS = {
    "reset-password.md": RESET, "account/change-password.md": f"# Change your password\n\n{CHANGE}",
    "account/password-rules.md": RULES, "refunds.md": REFUNDS, "shipping/delivery-times.markdown": DELIVERY,
}
# Files that are not markdown, worded to match a password question better than any article.
NOISE = {"notes.txt": "How do I reset my password? Reset your password: forgot password link.",
         "faq.json": '{"question": "How do I reset my password?"}'}


def make_folder(root: Path, files: dict[str, str] = FILES | NOISE) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    root.mkdir(parents=True, exist_ok=True)
    return root


def sources(rag: RAG) -> list[str]:
    return [item["source"] for item in rag.corpus]


def test_default_knowledge_dir_is_knowledge_in_the_current_directory(runtime, tmp_path, monkeypatch):
    make_folder(tmp_path / "knowledge")
    monkeypatch.chdir(tmp_path)

    rag = RAG(runtime=runtime)

    assert rag.knowledge_dir == (tmp_path / "knowledge").resolve()
    assert sorted(sources(rag)) == sorted(FILES)
    assert all(set(item) == {"source", "content"} for item in rag.corpus)
    assert {item["source"]: item["content"] for item in rag.corpus} == CONTENTS


def test_custom_relative_knowledge_dir_is_resolved_from_the_current_directory(runtime, tmp_path, monkeypatch):
    make_folder(tmp_path / "docs" / "kb")
    monkeypatch.chdir(tmp_path / "docs")

    rag = RAG(knowledge_dir="kb", runtime=runtime)

    assert sorted(sources(rag)) == sorted(FILES)
    assert rag.retrieve("I forgot my password, how do I reset it?", limit=1) == [RESET]


def test_absolute_knowledge_dir_works_from_any_current_directory(runtime, tmp_path, monkeypatch):
    folder = make_folder(tmp_path / "kb")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    rag = RAG(knowledge_dir=str(folder), runtime=runtime)

    assert sorted(sources(rag)) == sorted(FILES)
    assert rag.retrieve("How long does shipping take?", limit=1) == [DELIVERY]


@pytest.mark.parametrize("make", [lambda root: root / "missing", lambda root: make_folder(root / "empty", {}),
                                  lambda root: make_folder(root / "only-other-files", NOISE)])
def test_missing_or_empty_folder_gives_an_empty_corpus_and_no_results(runtime, tmp_path, make):
    rag = RAG(knowledge_dir=make(tmp_path), runtime=runtime)

    assert rag.corpus == []
    assert rag.retrieve("How do I reset my password?") == []


def test_retrieve_respects_the_limit(runtime, tmp_path):
    rag = RAG(knowledge_dir=make_folder(tmp_path / "kb"), runtime=runtime)

    assert len(rag.retrieve("password", limit=1)) == 1
    assert len(rag.retrieve("password", limit=2)) == 2
    assert sorted(rag.retrieve("password")) == sorted([RESET, CONTENTS["account/change-password.md"], RULES])


def test_non_markdown_files_are_neither_loaded_nor_retrieved(runtime, tmp_path):
    rag = RAG(knowledge_dir=make_folder(tmp_path / "kb"), runtime=runtime)

    retrieved = rag.retrieve("How do I reset my password?", limit=5)

    assert not {"notes.txt", "faq.json"} & set(sources(rag))
    assert retrieved and not set(retrieved) & set(NOISE.values())


def test_unrelated_question_retrieves_nothing(runtime, tmp_path):
    rag = RAG(knowledge_dir=make_folder(tmp_path / "kb"), runtime=runtime)

    assert rag.retrieve("What is the boiling point of tungsten in kelvin?") == []


def test_retrieve_returns_only_articles_loaded_from_its_folder(seeded, tmp_path):
    other = make_folder(tmp_path / "other", {"refunds.md": "# Refunds\n\nMoney back within 30 days, no questions.",
                                            "reset.md": f"# Reset your password\n\n{RESET}"})
    with seeded.session() as session:
        import_path(session, seeded.embedder, other)
    rag = RAG(knowledge_dir=make_folder(tmp_path / "kb", {"refunds.md": REFUNDS, "delivery.md": DELIVERY}),
              runtime=seeded)

    # The seed articles and the other folder hold the only password articles: none may come back.
    assert rag.retrieve("I forgot my password, how do I reset it?") == []
    assert rag.retrieve("How do I get my money back?") == [REFUNDS]


def test_constructing_again_skips_unchanged_files_and_forgets_deleted_ones(runtime, tmp_path):
    folder = make_folder(tmp_path / "kb")
    RAG(knowledge_dir=folder, runtime=runtime)
    (folder / "reset-password.md").unlink()

    rag = RAG(knowledge_dir=folder, runtime=runtime)

    assert (rag.report.unchanged, rag.report.pruned) == (4, 1)
    assert "reset-password.md" not in sources(rag)
    assert RESET not in rag.retrieve("I forgot my password, how do I reset it?")


def test_a_folder_that_was_deleted_leaves_nothing_behind(runtime, tmp_path):
    folder = make_folder(tmp_path / "kb")
    RAG(knowledge_dir=folder, runtime=runtime)
    for path in sorted(folder.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    folder.rmdir()

    rag = RAG(knowledge_dir=folder, runtime=runtime)

    assert (rag.corpus, rag.report.pruned) == ([], len(FILES))


def test_a_file_as_knowledge_dir_is_refused(runtime, tmp_path):
    with pytest.raises(NotADirectoryError):
        RAG(knowledge_dir=make_folder(tmp_path / "kb") / "refunds.md", runtime=runtime)


@pytest.mark.parametrize(("items", "expected"), [
    ([], ""),
    (["Only one."], "Additional Advisory Context (RAG):\nOnly one."),
    (["First.", "Second."], "Additional Advisory Context (RAG):\nFirst.\n---\nSecond."),
])
def test_format_advisory_context_uses_the_seed_prompt_format(items, expected):
    assert format_advisory_context(items) == expected


def test_python_m_service_rag_runs_a_standalone_check(fresh_database_url, tmp_path):
    make_folder(tmp_path / "knowledge")
    env = {**os.environ, "DATABASE_URL": fresh_database_url, "SUPPORTRAG_AUTO_SEED": "0",
           "SUPPORTRAG_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(REPO_ROOT)}
    for name in ("EMBEDDING_PROVIDER", "EMBEDDING_API_KEY", "EMBEDDING_BASE_URL", "EMBEDDING_MODEL"):
        env.pop(name, None)

    result = subprocess.run([sys.executable, "-m", "service.rag", "--limit", "2", "password"], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=300)

    assert result.returncode == 0, result.stderr
    assert f"Loaded {len(FILES)} articles" in result.stdout
    assert re.search(r"^Retrieved 2 items\b", result.stdout, re.MULTILINE)
    previews = re.findall(r"^\d\. (.*)$", result.stdout, re.MULTILINE)
    assert len(previews) == 2 and all(len(p) <= 201 for p in previews)
    assert set(previews) <= {" ".join(text.split())[:200] for text in (RESET, CONTENTS["account/change-password.md"],
                                                                      RULES)}
