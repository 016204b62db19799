"""Import articles from markdown files or a JSON-lines file, keyed by where they came from.

- ``import_path(session, embedder, path, prune=..., category=...)`` takes a markdown file (``.md`` or
  ``.markdown``), a folder (searched recursively for markdown files; other files and hidden files or
  folders are ignored) or a ``.jsonl`` file of ``{"title", "content", "category"?, "importance"?, "id"?}``
  objects (one per line; blank lines are skipped; other keys are refused, as by the API).
- ``import_markdown_files(session, embedder, [(name, bytes), ...], folder_label="uploads")`` does the same
  for uploaded files (the admin page): each is keyed ``upload:<folder_label>/<name>``, so uploading a file
  with the same name again updates that article, or skips it if the bytes are the same. A name may hold
  folders (``billing/refunds.md``: category ``billing``); a name with ``..`` or another extension fails.

Every imported article remembers its source (``source_path``) and the SHA-256 of its bytes
(``source_sha256``; for a JSON line, of its canonical JSON). An unchanged source is skipped without
embedding anything; a changed one goes through ``knowledge.update_article`` (re-embedded only if its text
changed); a new one through ``knowledge.bulk_add_articles``. Source keys:

- markdown: the file's absolute path, its folder resolved (``/srv/kb/billing/refunds.md``);
- JSON lines: ``<absolute path>#id=<id>`` when the line has an ``"id"``, else ``<absolute path>#L<line>``
  (give lines an id to keep their key when lines are inserted above them);
- uploads: ``upload:<folder_label>/<name>``.

Markdown: the title comes from the front matter, else the first ``# heading``, else the file name; the
category from the front matter, else ``category`` (the CLI's ``--category``), else the folder the file
is in (files at the top of an imported folder have none), shown as the first line of the folder's
``_category.txt`` when it has one ("Billing & invoices" for ``billing/``). Categories are one per name
whatever the case: "billing" joins an existing "Billing" (migration 0032's trigger); ``importance`` (0–2) from the front matter,
else 1.0 for a new article, while a changed one keeps its current importance (support leads may have
tuned it). The whole body (without the front matter) is stored as the content. Since unchanged files are
skipped, a new ``--category`` only reaches files that are new or changed.

A source that cannot be imported (not UTF-8, bad importance, empty, too long, bad JSON) is reported in
``ImportReport.failed`` and the others are still imported. ``prune`` deletes articles imported from under
the folder whose file no longer exists (for a ``.jsonl``: whose line is gone); a file that still exists
but failed to parse keeps its last good version; articles added through the API, the admin page or from
other folders are never touched. Like the other use cases these take a session and never commit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from service.db.models import Article
from service.knowledge.articles import ArticleSource, bulk_add_articles, refresh_article_statistics, update_article
from service.knowledge.versions import ChangeContext
from service.knowledge.audit import ImportanceCause
from service.knowledge.sources import (
    MARKDOWN_SUFFIXES,
    ImportFailure,
    ParsedArticle,
    folder_prefix,
    read_file,
    read_folder,
    read_jsonl,
    read_upload,
)
from service.providers.embeddings import Embedder
from service.validation import ValidationError

IMPORT_LOCK_KEY = 7_331_005  # serialises imports: two processes never insert the same source twice
IMPORT_BATCH_SIZE = 64

_JSONL_KEY = re.compile(r"(.*?\.jsonl)#(?:L\d+|id=.*)\Z", re.IGNORECASE | re.DOTALL)

Progress = Callable[[int, int], None]  # (sources done, sources in total)


@dataclass
class ImportReport:
    """What an import did; ``pending`` counts stored articles whose embedding failed (see ``reembed``)."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    pruned: int = 0
    pending: int = 0
    failed: list[ImportFailure] = field(default_factory=list)

    def summary(self) -> str:
        """One line for the console."""
        line = (f"added {self.added}, updated {self.updated}, unchanged {self.unchanged}, "
                f"pruned {self.pruned}, failed {len(self.failed)}")
        return f"{line} ({self.pending} pending embedding)" if self.pending else line


class _Ticker:
    """Counts finished sources and tells the progress callback."""

    def __init__(self, total: int, on_progress: Progress | None) -> None:
        self.total, self.done, self.on_progress = total, 0, on_progress

    def __call__(self, count: int) -> None:
        self.done += count
        if self.on_progress:
            self.on_progress(self.done, self.total)


def _sources_param(sources: list[str]) -> sa.BindParameter:
    """One array bind, whatever the number of sources (an IN list would need one bind each)."""
    return sa.bindparam("sources", sources, type_=ARRAY(sa.Text))


def _store(session: Session, embedder: Embedder, entries: list[ParsedArticle | ImportFailure],
           report: ImportReport, on_progress: Progress | None) -> None:
    """Add new sources, update changed ones, skip unchanged ones; failures are only counted."""
    tick = _Ticker(len(entries), on_progress)
    if tick.total and on_progress:
        on_progress(0, tick.total)
    parsed = [entry for entry in entries if isinstance(entry, ParsedArticle)]
    report.failed.extend(entry for entry in entries if isinstance(entry, ImportFailure))
    tick(len(report.failed))
    existing = {row.source_path: row for row in session.execute(
        sa.select(Article.id, Article.source_path, Article.source_sha256)
        .where(Article.source_path == sa.any_(_sources_param([item.source for item in parsed])))
    )}
    new: list[ParsedArticle] = []
    for item in parsed:
        row = existing.get(item.source)
        if row is None:
            new.append(item)
        elif row.source_sha256 == item.sha256:
            report.unchanged += 1
            tick(1)
    if new:
        ids = bulk_add_articles(session, embedder, [item.fields for item in new], batch_size=IMPORT_BATCH_SIZE,
                                on_progress=tick, sources=[ArticleSource(i.source, i.sha256) for i in new],
                                change=IMPORTER)
        report.added += len(ids)
        report.pending += session.execute(
            sa.select(sa.func.count()).select_from(Article)
            .where(Article.id == sa.any_(sa.bindparam("ids", ids, type_=ARRAY(sa.BigInteger))),
                   Article.embedding.is_(None))
        ).scalar_one()
    updated: list[int] = []
    for item in parsed:
        row = existing.get(item.source)
        if row is not None and row.source_sha256 != item.sha256:
            stored = update_article(session, embedder, row.id, item.fields,
                                    source=ArticleSource(item.source, item.sha256),
                                    cause=ImportanceCause("import"), change=IMPORTER)
            updated.append(row.id)
            report.updated += 1
            report.pending += int(stored.embedding_status == "pending")
            tick(1)
    refresh_article_statistics(session, updated)  # an update-only import moves the statistics as inserts do


IMPORTER = ChangeContext("importer", "import")  # the author of every version a folder import writes


def _delete(session: Session, ids: list[int]) -> int:
    """Delete articles by id in one statement; returns how many ids were given."""
    if ids:
        session.execute(sa.delete(Article).where(
            Article.id == sa.any_(sa.bindparam("ids", ids, type_=ARRAY(sa.BigInteger)))))
    return len(ids)


def _source_file(source: str) -> Path:
    """The file a source key points at (``x.jsonl#L3`` or ``x.jsonl#id=7`` → ``x.jsonl``)."""
    match = _JSONL_KEY.match(source)
    return Path(match.group(1) if match else source)


def _rows_under(session: Session, prefix: str) -> list[sa.Row]:
    """(id, source_path) of the articles imported from sources starting with ``prefix``."""
    return session.execute(
        sa.select(Article.id, Article.source_path).where(sa.func.starts_with(Article.source_path, prefix))
    ).all()


def prune_folder(session: Session, folder: Path) -> int:
    """Delete articles imported from under ``folder`` whose file no longer exists; returns how many."""
    rows = _rows_under(session, folder_prefix(folder))
    return _delete(session, [row.id for row in rows if not _source_file(row.source_path).is_file()])


def _lock(session: Session) -> None:
    """Wait for any other import to commit; later reads then see its rows (READ COMMITTED)."""
    session.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": IMPORT_LOCK_KEY})


def import_path(session: Session, embedder: Embedder, path: Path | str, *, prune: bool = False,
                category: str | None = None, on_progress: Progress | None = None) -> ImportReport:
    """Import a markdown file, a folder of them (recursively) or a ``.jsonl`` file; see the module doc."""
    path = Path(path)
    report = ImportReport()
    keys: set[str] = set()  # a .jsonl's current source keys (what --prune keeps)
    if path.is_dir():
        entries = read_folder(path, category)
    elif path.is_file() and path.suffix.lower() == ".jsonl":
        entries, keys = read_jsonl(path, category)
    elif path.is_file() and path.suffix.lower() in MARKDOWN_SUFFIXES:
        entries = [read_file(path, category)]
    elif not path.exists():
        raise ValidationError(f"{path} does not exist")
    else:
        raise ValidationError(f"{path} is not a folder, a markdown file (.md, .markdown) or a .jsonl file")
    _lock(session)
    _store(session, embedder, entries, report, on_progress)
    if prune and path.is_dir():
        report.pruned = prune_folder(session, path)
    elif prune and path.suffix.lower() == ".jsonl":
        rows = _rows_under(session, f"{path.resolve()}#")
        report.pruned = _delete(session, [row.id for row in rows if row.source_path not in keys])
    return report


def import_markdown_files(session: Session, embedder: Embedder, files: list[tuple[str, bytes]], *,
                          folder_label: str = "uploads", category: str | None = None,
                          on_progress: Progress | None = None) -> ImportReport:
    """Import uploaded markdown files given as (name, bytes); keyed ``upload:<folder_label>/<name>``."""
    entries: list[ParsedArticle | ImportFailure] = []
    seen: set[str] = set()
    for name, raw in files:
        entry = read_upload(name, raw, folder_label=folder_label, category=category)
        if entry.source in seen:
            entry = ImportFailure(entry.source, "the same file name was uploaded twice")
        seen.add(entry.source)
        entries.append(entry)
    report = ImportReport()
    _lock(session)
    _store(session, embedder, entries, report, on_progress)
    return report
