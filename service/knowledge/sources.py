"""Reading import sources: markdown files, JSON lines and uploads → validated article fields.

No database here: ``markdown_article``, ``jsonl_article`` and ``first_heading`` are pure; the ``read_*``
functions read files and turn every problem into an ``ImportFailure`` instead of raising.
``service.knowledge.importer`` stores the results and documents the rules.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from service.knowledge.markdown import parse_front_matter, scan_lines
from service.validation import ValidationError, clean_article_fields

MARKDOWN_SUFFIXES = (".md", ".markdown")
UPLOAD_PREFIX = "upload:"
FOLDER_NAME_FILE = "_category.txt"  # a folder's display name as a category: its first non-blank line


@dataclass(frozen=True)
class ParsedArticle:
    """A source ready to store: its key, the hash of its bytes and its validated fields."""

    source: str
    sha256: str
    fields: dict[str, Any]  # title, content, category; importance only when the source gives one


@dataclass(frozen=True)
class ImportFailure:
    """A source that was not imported, and why."""

    source: str
    reason: str


def describe_error(exc: ValidationError) -> str:
    """``field problem; field problem`` (or the message when no field is named)."""
    return "; ".join(f"{name} {problem}" for name, problem in exc.details.items()) or exc.message


def first_heading(body: str) -> str | None:
    """The text of the first level-1 ``#`` heading outside fenced code, or None."""
    return next((heading.text for _, heading in scan_lines(body.splitlines())
                 if heading is not None and heading.level == 1), None)


def _validated(fields: dict[str, Any]) -> dict[str, Any]:
    """Check fields as the API would; drop the default importance so an update keeps the current one."""
    cleaned = clean_article_fields(fields)
    if "importance" not in fields:
        del cleaned["importance"]
    return cleaned


def markdown_article(text: str, *, file_stem: str, folder_category: str | None,
                     category: str | None = None) -> dict[str, Any]:
    """Article fields from a markdown document; ValidationError if it cannot be stored."""
    doc = parse_front_matter(text)
    fields: dict[str, Any] = {
        "title": doc.meta.get("title") or first_heading(doc.body) or file_stem,
        "content": doc.body,
        "category": doc.meta.get("category") or category or folder_category,
    }
    raw = doc.meta.get("importance", "")
    if raw:
        try:
            fields["importance"] = float(raw)
        except ValueError:
            raise ValidationError("invalid article", {"importance": f"must be a number from 0 to 2, got {raw!r}"})
    return _validated(fields)


def jsonl_article(line: str, *, category: str | None = None) -> tuple[dict[str, Any], str | None]:
    """Article fields and optional id from one JSON line; ValidationError if it cannot be stored."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"not valid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(data, dict):
        raise ValidationError(f"must be a JSON object, got {type(data).__name__}")
    article_id = data.pop("id", None)
    if article_id is not None and (isinstance(article_id, bool) or not isinstance(article_id, (str, int))
                                   or not str(article_id).strip()):
        raise ValidationError("invalid article", {"id": "must be a non-empty string or an integer"})
    data.setdefault("category", category)  # the line decides its category, even by leaving it out
    return _validated(data), None if article_id is None else str(article_id).strip()


def canonical_sha256(data: Any) -> str:
    """SHA-256 of a JSON value written canonically (sorted keys, no spaces), so formatting is ignored."""
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def folder_prefix(folder: Path) -> str:
    """The source-key prefix of everything imported from under ``folder`` (ends with a separator)."""
    return os.path.join(str(folder.resolve()), "")


def markdown_files(folder: Path) -> list[Path]:
    """Markdown files under ``folder``, recursively, sorted; hidden files and folders are skipped."""
    return sorted(
        path for path in folder.rglob("*")
        if path.suffix.lower() in MARKDOWN_SUFFIXES and path.is_file()
        and not any(part.startswith(".") for part in path.relative_to(folder).parts)
    )


def folder_category(folder: Path) -> str:
    """The category a folder gives its files: the first line of its ``_category.txt``, else the folder's name."""
    try:
        lines = (folder / FOLDER_NAME_FILE).read_text(encoding="utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError):
        return folder.name
    return next((line.strip() for line in lines if line.strip()), folder.name)


def _parse_markdown_bytes(raw: bytes, *, source: str, file_stem: str, folder_category: str | None,
                          category: str | None) -> ParsedArticle | ImportFailure:
    """Decode (UTF-8, optional BOM) and parse; the hash is of the bytes, so any edit counts (and of a folder's
    display name, so giving a folder one updates its files as an edit would)."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return ImportFailure(source, f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})")
    try:
        fields = markdown_article(text, file_stem=file_stem, folder_category=folder_category, category=category)
    except ValidationError as exc:
        return ImportFailure(source, describe_error(exc))
    digest = hashlib.sha256(raw)
    if folder_category is not None and folder_category != PurePosixPath(source).parent.name:
        digest.update(b"\0category:" + folder_category.encode())
    return ParsedArticle(source, digest.hexdigest(), fields)


def read_markdown(path: Path, *, source: str, folder_category: str | None,
                  category: str | None) -> ParsedArticle | ImportFailure:
    """One markdown file, keyed ``source``."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return ImportFailure(source, f"cannot read: {exc.strerror or exc}")
    return _parse_markdown_bytes(raw, source=source, file_stem=path.stem, folder_category=folder_category,
                                 category=category)


def read_folder(folder: Path, category: str | None) -> list[ParsedArticle | ImportFailure]:
    """Every markdown file under ``folder``, keyed by its absolute path (the folder resolved, not the file)."""
    # Resolving only the folder keeps a symlinked file's key under the folder's prefix.
    root = folder.resolve()
    entries = []
    for path in markdown_files(folder):
        relative = path.relative_to(folder)
        if not path.resolve().is_relative_to(root):
            # A link out of the folder (to /etc/passwd.md, say) would publish whatever it points at.
            entries.append(ImportFailure(str(root / relative), "a link to a file outside the folder; not imported"))
            continue
        parent = folder_category(path.parent) if relative.parent.name else None  # top-level files: none
        entries.append(read_markdown(path, source=str(root / relative), folder_category=parent, category=category))
    return entries


def _stated_key(line: str, base: str) -> str | None:
    """The ``#id=`` key an invalid line asks for, if it is a JSON object with a usable id."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError:
        return None
    article_id = data.get("id") if isinstance(data, dict) else None
    if isinstance(article_id, (str, int)) and not isinstance(article_id, bool) and str(article_id).strip():
        return f"{base}#id={str(article_id).strip()}"
    return None


def read_jsonl(path: Path, category: str | None) -> tuple[list[ParsedArticle | ImportFailure], set[str]]:
    """Entries of a JSON-lines file and the source keys it still holds (failed lines included)."""
    base = str(path.resolve())
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        return [ImportFailure(base, f"cannot read as UTF-8 text: {exc}")], set()
    entries: list[ParsedArticle | ImportFailure] = []
    keys: dict[str, int] = {}
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        line_key = f"{base}#L{line_no}"
        try:
            fields, article_id = jsonl_article(line, category=category)
        except ValidationError as exc:
            # Keep (never prune) what this line stored before it broke.
            keys.setdefault(_stated_key(line, base) or line_key, line_no)
            entries.append(ImportFailure(line_key, describe_error(exc)))
            continue
        key = line_key if article_id is None else f"{base}#id={article_id}"
        if key in keys:
            entries.append(ImportFailure(line_key, f"duplicate id {article_id!r} (first on line {keys[key]})"))
            continue
        keys[key] = line_no
        entries.append(ParsedArticle(key, canonical_sha256(json.loads(line)), fields))
    return entries, set(keys)


def upload_key(name: str, folder_label: str) -> str | None:
    """``upload:<folder_label>/<relative name>``, or None for a name that climbs out (``..``) or is empty."""
    parts = [part for part in PurePosixPath(name.replace("\\", "/")).parts if part not in ("/", ".", "")]
    if not parts or ".." in parts:
        return None
    return f"{UPLOAD_PREFIX}{folder_label}/{'/'.join(parts)}"


def read_upload(name: str, raw: bytes, *, folder_label: str, category: str | None) -> ParsedArticle | ImportFailure:
    """One uploaded markdown file, keyed by its name under ``folder_label``."""
    source = upload_key(name, folder_label)
    if source is None:
        return ImportFailure(f"{UPLOAD_PREFIX}{folder_label}/{name}", "not a usable file name")
    path = PurePosixPath(source.removeprefix(f"{UPLOAD_PREFIX}{folder_label}/"))
    if path.suffix.lower() not in MARKDOWN_SUFFIXES:
        return ImportFailure(source, "not a markdown file (.md or .markdown)")
    folder_category = path.parent.name or None
    return _parse_markdown_bytes(raw, source=source, file_stem=path.stem, folder_category=folder_category,
                                 category=category)


def read_file(path: Path, category: str | None) -> ParsedArticle | ImportFailure:
    """A single markdown file; its category (unless given) is the name of the folder it is in."""
    source = str(path.parent.resolve() / path.name)
    return read_markdown(path, source=source, folder_category=folder_category(path.parent.resolve()) or None,
                         category=category)
