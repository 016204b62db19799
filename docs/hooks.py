"""MkDocs hooks: the API page's reference and openapi.json come from the app's own description at build time."""

from __future__ import annotations

import json
from typing import Any

from mkdocs.structure.files import File
from service.config import Settings
from service.web.openapi import build_spec

MARKER = "<!-- openapi: generated at build time from service.web.openapi.build_spec (docs/hooks.py) -->"


def _spec() -> dict[str, Any]:
    """The description an app with default settings serves at /api/openapi.json."""
    return build_spec(Settings())


def _schema_name(content: dict[str, Any] | None) -> str:
    """The schema a request or response body refers to, as a link to its entry below, or ``-``."""
    if not content:
        return "-"
    media = next(iter(content.values()))
    ref = media.get("schema", {}).get("$ref", "")
    name = ref.rsplit("/", 1)[-1]
    return f"[`{name}`](#schema-{name.lower()})" if name else f"`{next(iter(content))}`"


def render_reference(spec: dict[str, Any]) -> str:
    """One table row per operation, then every schema as JSON."""
    lines = ["| method and path | what | who | body | success |", "|---|---|---|---|---|"]
    for path, methods in spec["paths"].items():
        for method, operation in methods.items():
            who = "anyone" if {} in operation["security"] else "admin or agent token / login"
            if {} in operation["security"] and len(operation["security"]) > 1:
                who = "anyone (configurable)"
            status, answer = next((code, value) for code, value in operation["responses"].items()
                                  if code.startswith("2"))
            body = _schema_name(operation.get("requestBody", {}).get("content"))
            lines.append(f"| `{method.upper()} {path}` | {operation['summary']} | {who} | {body} | "
                         f"{status} {_schema_name(answer.get('content'))} |")
    lines += ["", "### Schemas", ""]
    for name, schema in spec["components"]["schemas"].items():
        lines += [f'<a id="schema-{name.lower()}"></a>', "", f"**`{name}`**", "", "```json",
                  json.dumps(schema, indent=2, ensure_ascii=False), "```", ""]
    return "\n".join(lines)


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Fill the API page's marker with the generated reference."""
    if MARKER in markdown:
        return markdown.replace(MARKER, render_reference(_spec()))
    return markdown


def on_files(files, config):
    """Publish the description beside the API page, as the app serves it (so links to openapi.json resolve)."""
    files.append(File.generated(config, "openapi.json", content=json.dumps(_spec(), indent=2, ensure_ascii=False)))
    return files
