"""Issue 28 item 4: one table of settings behind from_env, validation, `supportrag config` and the docs page."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from service.cli.main import main
from service.config import Settings
from service.config_table import AREAS, MASK, ConfigError, markdown_table, read_environment, specs

ROOT = Path(__file__).resolve().parent.parent
TABLE = {spec.env: (name, spec) for name, spec in specs(Settings)}
# How code reads a variable: os.environ.get / [] / getenv, a mapping named env, click's envvar=.
READS = (r'(?:environ|env)\.get\(\s*"([A-Z][A-Z0-9_]+)"', r'(?:environ|env)\[\s*"([A-Z][A-Z0-9_]+)"\s*\]',
         r'getenv\(\s*"([A-Z][A-Z0-9_]+)"', r'envvar="([A-Z][A-Z0-9_]+)"', r'_(?:int|float)\(env, "([A-Z0-9_]+)"')


def variables_read_by_the_code() -> set[str]:
    """Every environment variable a module of service/ reads (writes with setdefault are not reads)."""
    sources = "\n".join(path.read_text(encoding="utf-8") for path in (ROOT / "service").rglob("*.py"))
    return {name for pattern in READS for name in re.findall(pattern, sources)}


def test_every_variable_the_code_reads_is_in_the_settings_table():
    read = variables_read_by_the_code()
    assert sorted(read - set(TABLE)) == []


def test_the_pattern_still_finds_reads():
    sample = 'x = os.environ.get("A_B")\ny = env["C_D"]\nz = os.getenv("E_F")\n@click.option(envvar="F_G")\n'
    assert {name for pattern in READS for name in re.findall(pattern, sample)} == {"A_B", "C_D", "E_F", "F_G"}


def test_every_field_is_a_row_with_an_area_a_help_line_and_a_unique_variable():
    rows = specs(Settings)
    assert len(TABLE) == len(rows) == len(dataclasses.fields(Settings))
    assert {spec.area for _, spec in rows} == set(AREAS)
    assert [env for env, (_, spec) in TABLE.items() if not spec.help or "\n" in spec.help] == []


@dataclasses.dataclass(frozen=True, kw_only=True)
class SettingsWithAPlainField(Settings):
    """A field added the old way (no table row), as a branch merged before it is folded in would add it."""

    smtp_timeout: float = 10.0


def test_a_plain_field_keeps_its_default_and_is_left_out_of_the_table():
    values, sources = read_environment(SettingsWithAPlainField, {"PORT": "8080"})
    settings = SettingsWithAPlainField(**values)
    settings.validate()
    assert (settings.smtp_timeout, settings.port, sources["port"]) == (10.0, 8080, "environment")
    assert "smtp_timeout" not in dict(specs(SettingsWithAPlainField))
    assert "smtp_timeout" in {field.name for field in dataclasses.fields(SettingsWithAPlainField)}


def test_the_attribute_names_other_code_uses_are_kept():
    settings = Settings.from_env({"SMTP_HOST": "mail.example.com", "WEB_CONCURRENCY": "3", "SMTP_STARTTLS": "yes",
                                  "SUPPORTRAG_PUBLIC_URL": "https://help.example.com"})
    assert (settings.smtp_host, settings.web_concurrency, settings.smtp_starttls) == ("mail.example.com", 3, True)
    assert (settings.smtp_port, settings.rate_limit_login, settings.public_search) == (25, (10, 60), True)


@pytest.mark.parametrize("env, problem", [
    ({"SMTP_PORT": "70000"}, "SMTP_PORT must be between 1 and 65535"),
    ({"WEB_CONCURRENCY": "0"}, "WEB_CONCURRENCY must be at least 1"),
    ({"SUPPORTRAG_SECURE_COOKIES": "maybe"}, "SUPPORTRAG_SECURE_COOKIES must be one of"),
    ({"RETRIEVAL_MODE": "fuzzy"}, "RETRIEVAL_MODE must be one of vector, lexical, hybrid"),
    ({"MAIL_FROM": "a@b\nBcc: c@d"}, "MAIL_FROM must be one line"),
    ({"SUPPORTRAG_SESSION_IDLE_SECONDS": "50000"}, "SUPPORTRAG_SESSION_IDLE_SECONDS must be at most"),
])
def test_validation_comes_from_the_table_and_names_the_variable(env, problem):
    with pytest.raises(ConfigError, match=re.escape(problem)):
        Settings.from_env(env)


def test_sources_say_environment_derived_or_default():
    sources = Settings.sources({"EMBEDDING_API_KEY": "k", "PORT": "8080", "LLM_MODEL": ""})
    assert (sources["embedding_api_key"], sources["port"]) == ("environment", "environment")
    assert (sources["embedding_provider"], sources["embedding_model"]) == ("derived", "derived")
    assert (sources["llm_model"], sources["smtp_host"]) == ("default", "default")  # empty counts as unset


@pytest.fixture
def clean_environment(monkeypatch, tmp_path):
    """No setting from the developer's shell; the data folder in tmp."""
    for env in TABLE:
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setenv("SUPPORTRAG_DATA_DIR", str(tmp_path))


def test_supportrag_config_prints_effective_values_masks_secrets_and_names_sources(clean_environment):
    env = {"SMTP_PASSWORD": "hunter2-smtp", "LLM_API_KEY": "sk-live-llm", "PORT": "8081",
           "DATABASE_URL": "postgresql://app:db-pass-9@db.internal:5432/help"}
    result = CliRunner().invoke(main, ["config"], env=env)
    assert result.exit_code == 0, result.output
    assert not any(secret in result.output for secret in ("hunter2-smtp", "sk-live-llm", "db-pass-9"))
    lines = {line.split()[0]: line.split()[1:] for line in result.output.splitlines() if line and line[0] != "["}
    assert lines["SMTP_PASSWORD"] == [MASK, "environment"]
    assert lines["DATABASE_URL"] == [f"postgresql://app:{MASK}@db.internal:5432/help", "environment"]
    assert lines["PORT"] == ["8081", "environment"]
    assert lines["SMTP_HOST"] == ["unset", "default"] and lines["EMBEDDING_PROVIDER"] == ["local", "derived"]
    assert set(lines) == set(TABLE)
    assert [line for line in result.output.splitlines() if line.startswith("[")] == [f"[{a}]" for a in AREAS]


def test_supportrag_config_json_and_a_bad_setting(clean_environment):
    rows = json.loads(CliRunner().invoke(main, ["config", "--json"], env={"INBOUND_EMAIL_SECRET": "s3"}).output)
    assert {"area": "mail", "env": "INBOUND_EMAIL_SECRET", "value": MASK, "source": "environment"} in rows
    bad = CliRunner().invoke(main, ["config"], env={"HYBRID_POOL": "7"})
    assert bad.exit_code == 1 and "HYBRID_POOL must be between 50 and 10000" in bad.output


def test_the_configuration_page_is_the_table_generated_from_settings():
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    marker = "<!-- generated: supportrag config --markdown -->\n"
    assert marker in page, "docs/configuration.md lost its generated part"
    assert page.split(marker, 1)[1] == markdown_table(Settings), (
        "docs/configuration.md is out of date: regenerate its table with `supportrag config --markdown`")


def test_the_generated_page_lists_every_variable_with_its_default():
    table = markdown_table(Settings)
    for env, (name, spec) in TABLE.items():
        row = next(line for line in table.splitlines() if line.startswith(f"| `{env}` |"))
        assert spec.help.split("`")[0][:20] in row
    assert "| `SMTP_PORT` | integer | `25` |" in table
    assert "| `SUPPORTRAG_RATE_LIMIT_TICKETS` | rate | `10/minute` |" in table
