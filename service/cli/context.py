"""What every command shares: a runtime closed when the command ends, and one-line domain errors."""

from __future__ import annotations

import click

from service.config import ConfigError, Settings
from service.providers.embeddings import EmbeddingError
from service.runtime import Runtime
from service.validation import ValidationError


def connect(*, seed: bool | None = None) -> Runtime:
    """Connect, migrate, and (unless SUPPORTRAG_AUTO_SEED=0) seed a new database.

    The runtime's connections are closed when the command finishes.
    """
    runtime = Runtime.start(Settings.from_env(), seed=seed)
    click.get_current_context().call_on_close(runtime.close)
    return runtime


def connect_bare() -> Runtime:
    """Connect without migrating or seeding (the db commands); closed when the command finishes."""
    runtime = Runtime.start(Settings.from_env(), migrate=False, seed=False)
    click.get_current_context().call_on_close(runtime.close)
    return runtime


class CliGroup(click.Group):
    """Reports domain errors (bad input, provider down, bad settings) as one-line CLI errors."""

    def invoke(self, ctx: click.Context):
        """Run the command; turn domain errors into ``click.ClickException``."""
        try:
            return super().invoke(ctx)
        except ValidationError as exc:
            details = "; ".join(f"{field} {problem}" for field, problem in exc.details.items())
            raise click.ClickException(f"{exc.message}: {details}" if details else exc.message) from exc
        except (EmbeddingError, ConfigError) as exc:
            raise click.ClickException(str(exc)) from exc
