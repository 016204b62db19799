"""Files uploaded with a workspace form, read into ``FilePart`` values (the caps are checked by the use case)."""

from __future__ import annotations

from werkzeug.datastructures import FileStorage

from service.mail.compose import FilePart
from service.tickets.reply_files import safe_content_type, safe_filename


def uploaded_files(uploads: list[FileStorage]) -> list[FilePart]:
    """The non-empty uploads of a multipart form (a file input left empty sends a nameless, empty part)."""
    parts = [FilePart(safe_filename(upload.filename or ""), safe_content_type(upload.mimetype), upload.read())
             for upload in uploads if upload.filename]
    return parts
