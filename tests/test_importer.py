"""Importing markdown folders, JSON lines and uploads: parsing (pure), upserts by source, pruning, the CLI."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import sqlalchemy as sa

from service.db.engine import create_engine
from service.db.models import Article
from service.knowledge.articles import add_article, get_article, update_article
from service.knowledge.importer import import_markdown_files, import_path
from service.knowledge.sources import canonical_sha256, first_heading, jsonl_article, markdown_article, upload_key
from service.validation import ValidationError

from .helpers import CountingEmbedder, FailingEmbedder
from .helpers import run_cli as run


def write(root: Path, relative: str, content: str | bytes) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def imported(session, prefix: str) -> dict[str, sa.Row]:
    """Articles whose source starts with ``prefix``, by source."""
    rows = session.execute(
        sa.select(Article.id, Article.title, Article.content, Article.category, Article.importance,
                  Article.source_path, Article.source_sha256, Article.embedding_model)
        .where(sa.func.starts_with(Article.source_path, prefix))
    ).all()
    return {row.source_path: row for row in rows}


@pytest.fixture
def counting(local_embedder) -> CountingEmbedder:
    return CountingEmbedder(local_embedder)


@pytest.fixture
def tree(tmp_path) -> Path:
    """A knowledge folder: front-matter, heading and file-name titles; nested category folders; noise."""
    root = tmp_path / "kb"
    write(root, "welcome.md", "---\ntitle: Welcome to support\nimportance: 1.5\n---\n\nWe answer within a day.")
    write(root, "billing/refunds.md", "# Getting a refund\n\nReturn the item within 30 days for a refund.")
    write(root, "billing/cards/expired-card.md", "Update an expired card under Account > Payment methods.")
    write(root, "shipping/tracking.markdown", "---\ncategory: Delivery\n---\nTrack a parcel from Account > Orders.")
    write(root, "notes.txt", "Not an article, even though it mentions refunds.")
    write(root, "data.json", '{"title": "not imported"}')
    write(root, ".drafts/secret.md", "# Draft\n\nHidden folders are skipped.")
    return root


# --- pure parsing ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "stem", "folder", "option", "expected"), [
    ("---\ntitle: Refunds\ncategory: Billing\nimportance: 1.5\n---\n\nBody text.", "x", "f", None,
     {"title": "Refunds", "content": "Body text.", "category": "Billing", "importance": 1.5}),
    ("# Reset your password\n\nClick the link.", "reset", "account", None,
     {"title": "Reset your password", "content": "# Reset your password\n\nClick the link.", "category": "account"}),
    ("Just text.", "shipping-times", None, None,
     {"title": "shipping-times", "content": "Just text.", "category": None}),
    ("```bash\n# not a title\n```\n\n## Not level one\n\nText", "guide", None, None,
     {"title": "guide", "content": "```bash\n# not a title\n```\n\n## Not level one\n\nText", "category": None}),
    ("Intro.\n\n# Late title ##\n\nMore.", "x", None, None,
     {"title": "Late title", "content": "Intro.\n\n# Late title ##\n\nMore.", "category": None}),
    ("---\ntitle: T\n---\nBody", "x", "folder", "Cli", {"title": "T", "content": "Body", "category": "Cli"}),
    ("---\ncategory: Front\n---\nBody", "x", "folder", "Cli", {"title": "x", "content": "Body", "category": "Front"}),
    ("---\nimportance: 0\n---\nBody", "x", None, None,
     {"title": "x", "content": "Body", "category": None, "importance": 0.0}),
    ("\ufeff---\ntitle: With BOM\n---\nBody", "x", None, None, {"title": "With BOM", "content": "Body", "category": None}),
])
def test_markdown_article_takes_title_category_and_importance_in_order_of_precedence(text, stem, folder, option,
                                                                                     expected):
    assert markdown_article(text, file_stem=stem, folder_category=folder, category=option) == expected


@pytest.mark.parametrize(("text", "field"), [
    ("---\nimportance: high\n---\nBody", "importance"),
    ("---\nimportance: 2.5\n---\nBody", "importance"),
    ("---\nimportance: -0.1\n---\nBody", "importance"),
    ("---\nimportance: nan\n---\nBody", "importance"),
    ("---\ntitle: Only a title\n---\n", "content"),
    ("", "content"),
    ("# " + "x" * 301 + "\n\nBody", "title"),
    ("x" * 100_001, "content"),
])
def test_markdown_article_refuses_what_the_api_would_refuse(text, field):
    with pytest.raises(ValidationError) as info:
        markdown_article(text, file_stem="file", folder_category=None)
    assert field in info.value.details


@pytest.mark.parametrize(("body", "expected"), [
    ("# Title\n\ntext", "Title"),
    ("   # Indented #\n", "Indented"),
    ("#NoSpace\n\n## Second level\n", None),
    ("~~~\n# fenced\n~~~\n# After fence", "After fence"),
    ("", None),
])
def test_first_heading_finds_the_first_level_one_heading_outside_code(body, expected):
    assert first_heading(body) == expected


@pytest.mark.parametrize(("line", "option", "expected"), [
    ('{"title": "T", "content": "C"}', None, ({"title": "T", "content": "C", "category": None}, None)),
    ('{"id": 7, "title": "T", "content": "C", "category": "Billing", "importance": 2}', None,
     ({"title": "T", "content": "C", "category": "Billing", "importance": 2.0}, "7")),
    ('{"id": "faq-1", "title": "T", "content": "C"}', "Cli", ({"title": "T", "content": "C", "category": "Cli"}, "faq-1")),
    ('{"title": "T", "content": "C", "category": null}', "Cli", ({"title": "T", "content": "C", "category": None}, None)),
])
def test_jsonl_article_reads_fields_and_an_optional_id(line, option, expected):
    assert jsonl_article(line, category=option) == expected


@pytest.mark.parametrize(("line", "problem"), [
    ("not json", "not valid JSON"),
    ('["title", "content"]', "must be a JSON object"),
    ('{"title": "T"}', "content"),
    ('{"title": "T", "content": "C", "contents": "typo"}', "contents"),
    ('{"title": "T", "content": "C", "importance": true}', "importance"),
    ('{"title": "T", "content": "C", "importance": 3}', "importance"),
    ('{"id": true, "title": "T", "content": "C"}', "id"),
    ('{"id": " ", "title": "T", "content": "C"}', "id"),
])
def test_jsonl_article_refuses_bad_lines_with_a_reason(line, problem):
    with pytest.raises(ValidationError) as info:
        jsonl_article(line)
    assert problem in info.value.message or problem in info.value.details


def test_canonical_sha256_ignores_key_order_and_spacing():
    assert canonical_sha256({"a": 1, "b": "é"}) == canonical_sha256({"b": "é", "a": 1})
    assert canonical_sha256({"a": 1}) != canonical_sha256({"a": 2})


@pytest.mark.parametrize(("name", "expected"), [
    ("refunds.md", "upload:uploads/refunds.md"),
    ("billing/refunds.md", "upload:uploads/billing/refunds.md"),
    ("./a/./b.md", "upload:uploads/a/b.md"),
    ("/abs/x.md", "upload:uploads/abs/x.md"),
    ("../etc/x.md", None),
    ("", None),
])
def test_upload_key_keeps_names_inside_their_label(name, expected):
    assert upload_key(name, "uploads") == expected


# --- importing into the database ------------------------------------------------------------------------

def test_folder_import_reads_titles_and_categories_and_ignores_other_files(session, counting, tree):
    report = import_path(session, counting, tree)

    rows = imported(session, str(tree.resolve()) + "/")
    assert sorted(rows) == sorted(str(tree.resolve() / p) for p in (
        "welcome.md", "billing/refunds.md", "billing/cards/expired-card.md", "shipping/tracking.markdown"))
    by_name = {Path(source).name: row for source, row in rows.items()}
    assert (by_name["welcome.md"].title, by_name["welcome.md"].category, by_name["welcome.md"].importance) == (
        "Welcome to support", None, 1.5)
    assert (by_name["refunds.md"].title, by_name["refunds.md"].category) == ("Getting a refund", "billing")
    assert (by_name["expired-card.md"].title, by_name["expired-card.md"].category) == ("expired-card", "cards")
    assert by_name["tracking.markdown"].category == "Delivery"
    assert by_name["expired-card.md"].importance == 1.0
    assert by_name["welcome.md"].source_sha256 == hashlib.sha256((tree / "welcome.md").read_bytes()).hexdigest()
    assert all(row.embedding_model == counting.model_name for row in rows.values())
    assert (report.added, report.updated, report.unchanged, report.pruned, report.failed) == (4, 0, 0, 0, [])
    assert len(counting.texts) == 4


def test_reimporting_an_unchanged_folder_embeds_nothing(session, counting, tree):
    import_path(session, counting, tree)
    counting.texts.clear()

    report = import_path(session, counting, tree)

    assert (report.added, report.updated, report.unchanged) == (0, 0, 4)
    assert counting.texts == []


def test_a_changed_file_updates_its_article_in_place_and_is_reembedded(session, counting, tree):
    import_path(session, counting, tree)
    before = imported(session, str(tree.resolve()) + "/")
    counting.texts.clear()
    write(tree, "billing/refunds.md", "# Getting a refund\n\nReturn the item within 60 days for a refund.")

    report = import_path(session, counting, tree)

    after = imported(session, str(tree.resolve()) + "/")
    source = str(tree.resolve() / "billing/refunds.md")
    assert after[source].id == before[source].id
    assert "60 days" in after[source].content
    assert after[source].source_sha256 != before[source].source_sha256
    assert (report.added, report.updated, report.unchanged) == (0, 1, 3)
    # The H1 repeats the title, so what follows it is the lead: one text, the card and the only section.
    assert counting.texts == ["Getting a refund\n\nReturn the item within 60 days for a refund."]


def test_importance_only_change_updates_without_reembedding(session, counting, tree):
    import_path(session, counting, tree)
    counting.texts.clear()
    write(tree, "welcome.md", "---\ntitle: Welcome to support\nimportance: 0.5\n---\n\nWe answer within a day.")

    report = import_path(session, counting, tree)

    assert report.updated == 1
    assert imported(session, str(tree.resolve() / "welcome.md"))[str(tree.resolve() / "welcome.md")].importance == 0.5
    assert counting.texts == []


def test_changed_file_without_importance_keeps_the_importance_a_lead_tuned(session, counting, tree):
    import_path(session, counting, tree)
    source = str(tree.resolve() / "billing/refunds.md")
    update_article(session, counting, imported(session, source)[source].id, {"importance": 1.8})
    write(tree, "billing/refunds.md", "# Getting a refund\n\nReturn the item within 45 days.")

    import_path(session, counting, tree)

    row = imported(session, source)[source]
    assert (row.importance, row.content) == (1.8, "# Getting a refund\n\nReturn the item within 45 days.")


def test_prune_removes_only_vanished_files_under_the_imported_folder(session, counting, tmp_path):
    kb, sibling = tmp_path / "kb", tmp_path / "kb-archive"  # same name prefix, different folder
    write(kb, "keep.md", "# Keep\n\nStays.")
    gone = write(kb, "sub/gone.md", "# Gone\n\nIts file is deleted.")
    sibling_file = write(sibling, "old.md", "# Old\n\nAlso deleted, but in another folder.")
    import_path(session, counting, kb)
    import_path(session, counting, sibling)
    api_article = add_article(session, counting, {"title": "Made in the admin", "content": "No file at all."})
    gone.unlink()
    sibling_file.unlink()

    without = import_path(session, counting, kb)
    assert without.pruned == 0 and str(gone.resolve()) in imported(session, str(kb.resolve()))

    report = import_path(session, counting, kb, prune=True)

    assert report.pruned == 1
    assert sorted(imported(session, str(tmp_path.resolve()))) == sorted([
        str(kb.resolve() / "keep.md"), str(sibling.resolve() / "old.md")])
    assert get_article(session, api_article.id, counting.model_name).title == "Made in the admin"


def test_folder_prune_keeps_articles_of_a_jsonl_file_that_still_exists(session, counting, tmp_path):
    kb = tmp_path / "kb"
    write(kb, "a.md", "# A\n\nText.")
    jsonl = write(kb, "extra/faq.JSONL", '{"id": "x#1", "title": "FAQ", "content": "Answer."}\n'
                                         '{"title": "FAQ 2", "content": "Another answer."}\n')
    import_path(session, counting, kb)
    assert import_path(session, counting, jsonl).added == 2

    report = import_path(session, counting, kb, prune=True)

    assert report.pruned == 0
    assert len(imported(session, str(kb.resolve()))) == 3


def test_jsonl_import_reports_bad_lines_by_number_and_imports_the_rest(session, counting, tmp_path):
    path = write(tmp_path, "articles.jsonl", "\n".join([
        '{"id": "a1", "title": "Gift cards", "content": "Check the balance under Account > Gift cards."}',
        '{"title": "Broken", "content": ',
        '',
        '{"title": "Store hours", "content": "We are open 9 to 5.", "category": "General", "importance": 0.5}',
        '{"title": "No content"}',
    ]))

    report = import_path(session, counting, path)

    base = str(path.resolve())
    assert (report.added, [f.source for f in report.failed]) == (2, [f"{base}#L2", f"{base}#L5"])
    assert report.failed[0].reason.startswith("not valid JSON")
    assert "content is required" in report.failed[1].reason
    rows = imported(session, base)
    assert sorted(rows) == [f"{base}#L4", f"{base}#id=a1"]
    assert (rows[f"{base}#L4"].category, rows[f"{base}#L4"].importance) == ("General", 0.5)


def test_jsonl_reimport_skips_reformatted_lines_and_prune_removes_deleted_ones(session, counting, tmp_path):
    path = write(tmp_path, "articles.jsonl", '{"id": 1, "title": "One", "content": "First."}\n'
                                             '{"id": 2, "title": "Two", "content": "Second."}\n'
                                             '{"id": 3, "title": "Three", "content": "Third."}\n')
    import_path(session, counting, path)
    counting.texts.clear()
    # Line 1 is gone, line 2 is only reformatted, line 3 breaks: its article must survive the prune.
    write(tmp_path, "articles.jsonl", '{ "content": "Second.",  "title": "Two", "id": 2 }\n'
                                      '{"id": 3, "title": "Three", "content": ""}\n')

    report = import_path(session, counting, path, prune=True)

    base = str(path.resolve())
    assert (report.unchanged, report.pruned, len(report.failed)) == (1, 1, 1)
    assert sorted(imported(session, base)) == [f"{base}#id=2", f"{base}#id=3"]
    assert counting.texts == []


def test_files_that_are_not_utf8_or_have_bad_importance_are_reported_and_the_rest_imported(session, counting,
                                                                                           tmp_path):
    kb = tmp_path / "kb"
    write(kb, "good.md", "# Good\n\nFine.")
    write(kb, "latin1.md", "# Caf\xe9\n\nNot UTF-8.".encode("latin-1"))
    write(kb, "bad-importance.md", "---\nimportance: very\n---\nText.")

    report = import_path(session, counting, kb)

    reasons = {Path(f.source).name: f.reason for f in report.failed}
    assert reasons.keys() == {"latin1.md", "bad-importance.md"}
    assert "not UTF-8" in reasons["latin1.md"]
    assert "importance" in reasons["bad-importance.md"]
    assert report.added == 1 and list(imported(session, str(kb.resolve()))) == [str(kb.resolve() / "good.md")]


def test_embedding_failure_stores_imported_articles_as_pending(session, tmp_path):
    kb = tmp_path / "kb"
    write(kb, "a.md", "# A\n\nText.")

    report = import_path(session, FailingEmbedder(ConnectionError("provider unreachable")), kb)

    assert (report.added, report.pending) == (1, 1)
    assert imported(session, str(kb.resolve()))[str(kb.resolve() / "a.md")].embedding_model is None
    assert "pending" in report.summary()


def test_a_single_file_takes_the_folder_it_is_in_as_category(session, counting, tree):
    report = import_path(session, counting, tree / "billing" / "cards" / "expired-card.md")

    source = str(tree.resolve() / "billing/cards/expired-card.md")
    assert report.added == 1 and imported(session, source)[source].category == "cards"


def test_progress_counts_every_source_including_failures(session, counting, tree):
    write(tree, "broken.md", b"\xff\xfe")
    calls = []

    import_path(session, counting, tree, on_progress=lambda done, total: calls.append((done, total)))

    assert calls[0] == (0, 5) and calls[-1] == (5, 5)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)


def test_import_path_refuses_a_file_it_cannot_read_as_articles(session, counting, tree):
    with pytest.raises(ValidationError, match="not a folder, a markdown file"):
        import_path(session, counting, tree / "notes.txt")


def test_uploaded_files_are_keyed_by_name_and_reuploads_are_skipped_or_updated(session, counting):
    files = [("refunds.md", b"# Refunds\n\nWithin 30 days."), ("billing/cards.md", b"Cards we accept."),
             ("notes.txt", b"Not markdown."), ("../escape.md", b"# Escape"), ("refunds.md", b"# Duplicate")]

    report = import_markdown_files(session, counting, files)

    rows = imported(session, "upload:uploads/")
    assert sorted(rows) == ["upload:uploads/billing/cards.md", "upload:uploads/refunds.md"]
    assert (rows["upload:uploads/billing/cards.md"].title, rows["upload:uploads/billing/cards.md"].category) == (
        "cards", "billing")
    assert report.added == 2 and len(report.failed) == 3
    again = import_markdown_files(session, counting, [("refunds.md", b"# Refunds\n\nWithin 30 days."),
                                                      ("billing/cards.md", b"Cards we accept, and PayPal.")])
    assert (again.added, again.updated, again.unchanged) == (0, 1, 1)


# --- the console command --------------------------------------------------------------------------------

@pytest.fixture
def cli_database(monkeypatch, fresh_database_url, tmp_path) -> str:
    """Commands run against a new empty database, unseeded, with the default local embedder."""
    for name in ("EMBEDDING_PROVIDER", "EMBEDDING_API_KEY", "EMBEDDING_BASE_URL", "EMBEDDING_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATABASE_URL", fresh_database_url)
    monkeypatch.setenv("SUPPORTRAG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("SUPPORTRAG_AUTO_SEED", "0")
    return fresh_database_url




def stored(url: str) -> list[tuple[str, str | None]]:
    """(title, category) of every article in the CLI's database."""
    engine = create_engine(url, pool_size=1)
    try:
        with engine.connect() as connection:
            return sorted(connection.execute(sa.select(Article.title, Article.category)).all())
    finally:
        engine.dispose()


def test_cli_import_summarises_skips_unchanged_files_and_prunes(cli_database, tree):
    first = run("import", str(tree))
    assert first.exit_code == 0, first.output
    assert "added 4, updated 0, unchanged 0, pruned 0, failed 0" in first.stdout

    (tree / "billing" / "refunds.md").unlink()
    second = run("import", str(tree), "--prune")

    assert second.exit_code == 0, second.output
    assert "added 0, updated 0, unchanged 3, pruned 1, failed 0" in second.stdout
    assert [title for title, _ in stored(cli_database)] == ["Welcome to support", "expired-card", "tracking"]


def test_cli_import_exits_nonzero_when_a_file_fails_but_imports_the_rest(cli_database, tmp_path):
    kb = tmp_path / "kb"
    write(kb, "good.md", "# Good\n\nFine.")
    write(kb, "bad.md", b"\xff\xfe not text")

    result = run("import", str(kb), "--category", "Help", expect_success=False)

    assert result.exit_code == 1
    assert "added 1, updated 0, unchanged 0, pruned 0, failed 1" in result.stdout
    assert f"failed: {kb.resolve() / 'bad.md'}: not UTF-8" in result.stderr
    assert stored(cli_database) == [("Good", "Help")]
