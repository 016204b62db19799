"""The table behind ``Settings``: each field's variable, type, default, help and check, in one place (issue 28).

A field of ``service.config.Settings`` is declared with one of the helpers below (``text``, ``integer``, ``number``,
``flag``, ``rate``, ``directory``); the helper returns a ``dataclasses.field`` whose metadata holds a ``Spec``.
``Settings.from_env``, ``Settings.validate``, ``supportrag config`` and the configuration page all read that table,
so a setting is described once. Imports nothing from the service: it sits in the config layer.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping
from urllib.parse import urlsplit, urlunsplit

AREAS = ("database", "embedding", "retrieval", "tickets", "mail", "web", "learning")
MASK = "********"
FALSE_WORDS = ("0", "false", "no", "off")
TRUE_WORDS = ("1", "true", "yes", "on")


class ConfigError(ValueError):
    """A setting has a value the service cannot run with."""


@dataclass(frozen=True)
class Spec:
    """One row of the table: how a field is read from the environment, checked and documented."""

    env: str
    area: str
    kind: str  # what the docs call its type: text, integer, number, boolean, rate, path
    help: str
    parse: Callable[[str, str], Any]  # (variable name, raw non-empty text) → value
    check: Callable[[Any], bool] | None = None  # a valid value (None, "unset", is always valid)
    rule: str = ""  # what ``check`` requires, said after "<VAR> must be"
    secret: bool = False  # masked by ``supportrag config`` and never in a repr
    derive: Callable[[Mapping[str, Any]], Any] | None = None  # default computed from the fields declared before
    default_text: str | None = None  # the default as the docs say it, when it is derived or per machine


def _spec(field: dataclasses.Field) -> Spec | None:
    """The Spec a Settings field carries; None for a plain field not yet declared in the table."""
    return field.metadata.get("spec")


def _declared(settings_class: Any) -> list[tuple[dataclasses.Field, Spec]]:
    """The fields that carry a Spec, in declaration order. A plain field keeps its default and is read by no one
    here (tests/test_config.py fails until it is declared), so a field added the old way cannot break start-up."""
    return [(field, spec) for field in dataclasses.fields(settings_class) if (spec := _spec(field)) is not None]


def specs(settings_class: type) -> list[tuple[str, Spec]]:
    """(attribute, spec) for every declared field of ``settings_class``, in declaration order."""
    return [(field.name, spec) for field, spec in _declared(settings_class)]


def _declare(env: str, default: Any, help: str, *, area: str, kind: str, parse: Callable[[str, str], Any],
             check: Callable[[Any], bool] | None = None, rule: str = "", secret: bool = False,
             derive: Callable[[Mapping[str, Any]], Any] | None = None, default_text: str | None = None,
             factory: Callable[[], Any] | None = None) -> Any:
    """A dataclass field carrying its Spec."""
    if area not in AREAS:
        raise ValueError(f"{env}: unknown area {area!r}")
    spec = Spec(env=env, area=area, kind=kind, help=help, parse=parse, check=check, rule=rule, secret=secret,
                derive=derive, default_text=default_text)
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata={"spec": spec}, repr=not secret)
    return dataclasses.field(default=default, metadata={"spec": spec}, repr=not secret)


def _between(low: float | None, high: float | None) -> tuple[Callable[[Any], bool] | None, str]:
    """A range check and its wording."""
    if low is None and high is None:
        return None, ""
    if high is None:
        return (lambda value: value >= low), f"at least {low}"
    if low is None:
        return (lambda value: value <= high), f"at most {high}"
    return (lambda value: low <= value <= high), f"between {low} and {high}"


_PERIODS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
_RATE_LIMIT = re.compile(r"^(?P<count>\d+)\s*/\s*(?P<number>\d+)?\s*(?:(?P<unit>second|minute|hour|day)s?)?$")


def parse_rate_limit(name: str, raw: str | None, default: str) -> tuple[int, int] | None:
    """``"10/minute"``, ``"5/15minutes"`` or ``"10/60"`` (seconds) → (count, seconds); ``"off"``/``"0"`` → None."""
    value = (raw or default).strip().lower()
    if value in ("0", "off", "none"):
        return None
    match = _RATE_LIMIT.match(value)
    if not match or int(match["count"]) < 1 or not (match["number"] or match["unit"]):
        raise ConfigError(f"{name} must look like '10/minute', '5/15minutes' or '10/60' (seconds), "
                          f"or be 'off'; got {value!r}")
    seconds = int(match["number"] or 1) * _PERIODS[match["unit"] or "second"]
    if seconds < 1:
        raise ConfigError(f"{name} needs a period of at least one second, got {value!r}")
    return int(match["count"]), seconds


def _parse_text(_name: str, raw: str) -> str:
    """Text as given."""
    return raw


def _parse_int(name: str, raw: str) -> int:
    """A whole number, or a ConfigError naming the variable."""
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from None


def _parse_float(name: str, raw: str) -> float:
    """A finite number, or a ConfigError naming the variable."""
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, got {raw!r}")
    return value


def _parse_flag(name: str, raw: str) -> bool:
    """1/true/yes/on or 0/false/no/off, any case."""
    word = raw.strip().lower()
    if word in TRUE_WORDS or word in FALSE_WORDS:
        return word in TRUE_WORDS
    raise ConfigError(f"{name} must be one of {', '.join(TRUE_WORDS + FALSE_WORDS)}; got {raw!r}")


def text(env: str, default: str | None, help: str, *, area: str, choices: tuple[str, ...] = (),
         secret: bool = False, one_line: bool = False, derive: Callable[[Mapping[str, Any]], Any] | None = None,
         default_text: str | None = None, parse: Callable[[str, str], Any] = _parse_text) -> Any:
    """A text setting; an empty variable counts as unset."""
    check, rule = None, ""
    if choices:
        check, rule = (lambda value: value in choices), "one of " + ", ".join(choices)
    elif one_line:
        check, rule = (lambda value: "\r" not in value and "\n" not in value), "one line"
    kind = " \\| ".join(f"`{choice}`" for choice in choices) if choices else "text"
    return _declare(env, default, help, area=area, kind=kind, parse=parse, check=check, rule=rule, secret=secret,
                    derive=derive, default_text=default_text)


def integer(env: str, default: int | None, help: str, *, area: str, low: int | None = None,
            high: int | None = None, default_text: str | None = None) -> Any:
    """An integer setting, optionally bounded (inclusive)."""
    check, rule = _between(low, high)
    return _declare(env, default, help, area=area, kind="integer", parse=_parse_int, check=check, rule=rule,
                    default_text=default_text)


def number(env: str, default: float, help: str, *, area: str, low: float | None = None, high: float | None = None,
           check: Callable[[Any], bool] | None = None, rule: str = "") -> Any:
    """A finite number, bounded (inclusive) or checked by ``check`` (then ``rule`` says what it needs)."""
    if check is None:
        check, rule = _between(low, high)
    return _declare(env, default, help, area=area, kind="number", parse=_parse_float, check=check, rule=rule)


def flag(env: str, default: bool, help: str, *, area: str) -> Any:
    """A boolean: 1/true/yes/on or 0/false/no/off."""
    return _declare(env, default, help, area=area, kind="boolean", parse=_parse_flag)


def rate(env: str, default: str, help: str, *, area: str) -> Any:
    """A ``COUNT/PERIOD`` limit (or ``off``), read by ``parse_rate_limit`` into (count, seconds) or None."""
    return _declare(env, parse_rate_limit(env, None, default), help, area=area, kind="rate",
                    parse=lambda name, raw: parse_rate_limit(name, raw, default), default_text=f"`{default}`")


def directory(env: str, factory: Callable[[], Path], help: str, *, area: str, default_text: str) -> Any:
    """A folder; ``~`` is expanded."""
    return _declare(env, None, help, area=area, kind="path", parse=lambda _name, raw: Path(raw).expanduser(),
                    factory=factory, default_text=default_text)


def read_environment(settings_class: type, env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """Every field's value from ``env`` (else its default) and where it came from: environment, derived, default."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for field, spec in _declared(settings_class):
        raw = env.get(spec.env)
        if raw is not None and raw != "":
            values[field.name], sources[field.name] = spec.parse(spec.env, raw), "environment"
        elif spec.derive is not None:
            values[field.name], sources[field.name] = spec.derive(values), "derived"
        else:
            values[field.name] = field.default_factory() if field.default_factory is not dataclasses.MISSING \
                else field.default
            sources[field.name] = "default"
    return values, sources


def check_fields(settings: Any) -> None:
    """Raise ConfigError for the first field whose value fails its own check."""
    for field, spec in _declared(settings):
        value = getattr(settings, field.name)
        if value is not None and spec.check is not None and not spec.check(value):
            raise ConfigError(f"{spec.env} must be {spec.rule}, got {value!r}")


def mask_url(url: str) -> str:
    """A connection URL with its password replaced by the mask."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:{MASK}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def shown(spec: Spec, value: Any) -> str:
    """A value as ``supportrag config`` prints it: secrets masked, URLs without their password."""
    if value is None:
        return "off" if spec.kind == "rate" else "unset"
    if spec.secret:
        return MASK
    if spec.kind == "rate":
        return f"{value[0]}/{value[1]}s"
    if isinstance(value, str) and "://" in value:
        return mask_url(value)
    return str(value)


def _markdown_default(spec: Spec, default: Any) -> str:
    """The default column of the configuration page."""
    if spec.default_text is not None:
        return spec.default_text
    if default is None:
        return "unset"
    if isinstance(default, bool):
        return "`1`" if default else "`0`"
    return f"`{default}`"


def markdown_table(settings_class: type) -> str:
    """The configuration page's reference: one table per area, one row per variable."""
    blocks = []
    for area in AREAS:
        rows = [(field, spec) for field, spec in _declared(settings_class) if spec.area == area]
        lines = [f"### {area.capitalize()}", "", "| variable | type | default | meaning |", "|---|---|---|---|"]
        for field, spec in rows:
            default = None if field.default is dataclasses.MISSING else field.default
            note = f" ({spec.rule})" if spec.rule and not spec.rule.startswith("one of") else ""
            help_text = re.sub(r"\|", "\\|", spec.help) + note
            lines.append(f"| `{spec.env}` | {spec.kind} | {_markdown_default(spec, default)} | {help_text} |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


@dataclass(frozen=True)
class EffectiveSetting:
    """One line of ``supportrag config``: a variable, its value as shown (secrets masked) and its source."""

    area: str
    env: str
    value: str
    source: str


def describe(settings: Any, sources: Mapping[str, str]) -> list[EffectiveSetting]:
    """Every setting of ``settings`` in table order, masked, with where its value came from."""
    return [EffectiveSetting(area=spec.area, env=spec.env, value=shown(spec, getattr(settings, name)),
                             source=sources[name])
            for name, spec in specs(type(settings))]
