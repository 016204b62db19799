"""The ``supportrag`` console script. Each command's docstring is its help."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import click

from .config import ConfigError, Settings
from .runtime import Runtime


def _runtime(*, seed: bool | None = None) -> Runtime:
    """Connect, migrate, and (unless SUPPORTRAG_AUTO_SEED=0) seed a new database.

    The runtime's connections are closed when the command finishes.
    """
    runtime = Runtime.start(Settings.from_env(), seed=seed)
    click.get_current_context().call_on_close(runtime.close)
    return runtime


def _bare_runtime() -> Runtime:
    """Connect without migrating or seeding (the db commands); closed when the command finishes."""
    runtime = Runtime.start(Settings.from_env(), migrate=False, seed=False)
    click.get_current_context().call_on_close(runtime.close)
    return runtime


def _print_results(results, weights, as_json: bool, *, explain: bool = False) -> None:
    if as_json:
        click.echo(json.dumps([r.to_dict(explain=explain) for r in results], indent=2))
        return
    if not results:
        click.echo("No results.")
    for rank, r in enumerate(results, start=1):
        click.echo(f"{rank}. {r.section or r.title}  [{r.category or '-'}]  (id {r.id})")
        similarity = "n/a" if r.similarity is None else f"{r.similarity:.4f}"
        relevance = f"similarity {similarity}" if r.relevance == r.similarity else \
            f"relevance {r.relevance:.4f} (similarity {similarity})"
        click.echo(f"   score {r.score:.4f} = {relevance}×{weights.similarity_weight:g}"
                   f" + recency {r.recency:.4f}×{weights.recency_weight:g}×importance {r.importance:.2f}")
        if explain and r.explain:
            e = r.explain
            click.echo(f"   vector rank {e['vector_rank']}, lexical rank {e['lexical_rank']}, "
                       f"matched terms: {', '.join(e['matched_terms']) or '-'}")
        click.echo(f"   {r.snippet}")


class _Group(click.Group):
    """Reports domain errors (bad input, provider down, bad settings) as one-line CLI errors."""

    def invoke(self, ctx: click.Context):
        from .embeddings import EmbeddingError
        from .validation import ValidationError

        try:
            return super().invoke(ctx)
        except ValidationError as exc:
            details = "; ".join(f"{field} {problem}" for field, problem in exc.details.items())
            raise click.ClickException(f"{exc.message}: {details}" if details else exc.message) from exc
        except (EmbeddingError, ConfigError) as exc:
            raise click.ClickException(str(exc)) from exc


@click.group(cls=_Group)
@click.option("-v", "--verbose", is_flag=True, help="Log progress details.")
def main(verbose: bool) -> None:
    """Support-ticket answering service on PostgreSQL + pgvector."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")


@main.command()
@click.option("--host", envvar="SUPPORTRAG_HOST", default="127.0.0.1", show_default=True)
@click.option("--port", envvar="PORT", default=5000, show_default=True, type=int)
@click.option("--dev", is_flag=True, help="Flask's development server instead of gunicorn.")
@click.option("--workers", envvar="WEB_CONCURRENCY", default=1, show_default=True, type=int)
@click.option("--threads", default=4, show_default=True, type=int)
def serve(host: str, port: int, dev: bool, workers: int, threads: int) -> None:
    """Start the database if embedded, migrate, seed on first run, and serve HTTP."""
    from .serving import serve_forever

    serve_forever(host=host, port=port, dev=dev, workers=workers, threads=threads)


@main.group()
def db() -> None:
    """Schema migrations."""


@db.command("upgrade")
@click.argument("revision", default="head")
def db_upgrade(revision: str) -> None:
    """Migrate the database up to REVISION (default: head)."""
    from .migrate import current_revision, upgrade_database

    runtime = _bare_runtime()
    upgrade_database(runtime.engine, revision)
    click.echo(f"database at revision {current_revision(runtime.engine) or 'none'}")


@db.command("downgrade")
@click.argument("revision")
def db_downgrade(revision: str) -> None:
    """Migrate the database down to REVISION ('base' removes every table)."""
    from .migrate import current_revision, downgrade_database

    runtime = _bare_runtime()
    downgrade_database(runtime.engine, revision)
    click.echo(f"database at revision {current_revision(runtime.engine) or 'none'}")


@db.command("current")
def db_current() -> None:
    """Print the database's current revision."""
    from .migrate import current_revision

    click.echo(current_revision(_bare_runtime().engine) or "none")


@main.command()
def seed() -> None:
    """Insert the default articles, once per database."""
    inserted = _runtime(seed=False).seed()
    click.echo(f"inserted {inserted} articles" if inserted else "already seeded; nothing inserted")


@main.command()
@click.option("--title", required=True)
@click.option("--content", help="Article text (or use --file).")
@click.option("--file", "file_", type=click.File("r", encoding="utf-8"), help="Read the content from a file ('-' for stdin).")
@click.option("--category")
@click.option("--importance", type=float, default=1.0, show_default=True)
def add(title: str, content: str | None, file_, category: str | None, importance: float) -> None:
    """Add one article and embed it."""
    from .knowledge import add_article

    if (content is None) == (file_ is None):
        raise click.UsageError("give exactly one of --content or --file")
    runtime = _runtime()
    with runtime.session() as session:
        article = add_article(session, runtime.embedder, {
            "title": title, "content": content if content is not None else file_.read(),
            "category": category, "importance": importance,
        })
    click.echo(f"added article {article.id} ({article.embedding_status})")
    if article.embedding_error:
        click.echo(f"embedding pending: {article.embedding_error}; run 'supportrag reembed' later", err=True)


@main.command("import")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--prune", is_flag=True, help="Delete articles imported from PATH whose file (or line) is gone.")
@click.option("--category", help="Category for files whose front matter names none (instead of their folder).")
def import_command(path: Path, prune: bool, category: str | None) -> None:
    """Import PATH: a markdown file, a folder of them (recursively) or a .jsonl; unchanged files are skipped."""
    from tqdm import tqdm

    from .importer import import_path

    runtime = _runtime()
    with tqdm(unit="file", desc="importing", file=sys.stderr) as bar, runtime.session() as session:
        def show(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        report = import_path(session, runtime.embedder, path, prune=prune, category=category, on_progress=show)
    for failure in report.failed:
        click.echo(f"failed: {failure.source}: {failure.reason}", err=True)
    click.echo(report.summary())
    if report.pending:
        click.echo("some embeddings are pending; run 'supportrag reembed' later", err=True)
    if report.failed:
        click.get_current_context().exit(1)


@main.command()
@click.argument("query")
@click.option("--limit", default=3, show_default=True, type=int)
@click.option("--mode", type=click.Choice(["vector", "lexical", "hybrid"]), help="Override RETRIEVAL_MODE.")
@click.option("--explain", is_flag=True, help="Show each leg's rank and the matched terms.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def search(query: str, limit: int, mode: str | None, explain: bool, as_json: bool) -> None:
    """Rank articles for QUERY and show the score breakdown."""
    from dataclasses import replace

    from .search import run_search

    runtime = _runtime()
    retrieval = replace(runtime.retrieval, mode=mode) if mode else runtime.retrieval
    with runtime.session() as session:
        outcome = run_search(session, runtime.embedder, query, limit=limit, weights=runtime.weights,
                             retrieval=retrieval)
    if outcome.degraded and not as_json:
        click.echo(f"(degraded: {outcome.degraded}; keyword search only)", err=True)
    _print_results(outcome.results, runtime.weights, as_json, explain=explain)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def stats(as_json: bool) -> None:
    """Count articles by embedding state; show the model and the vector index."""
    from .knowledge import knowledge_stats

    runtime = _runtime()
    with runtime.session() as session:
        data = knowledge_stats(session, runtime.embedder.model_name)
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    for key in ("articles", "embedded", "pending", "stale", "model"):
        click.echo(f"{key:>9}: {data[key]}")
    click.echo(f"{'index':>9}: {data['index']['definition'] if data['index'] else 'none'}")


@main.command()
@click.option("--batch-size", default=64, show_default=True, type=int)
def reembed(batch_size: int) -> None:
    """Embed articles that have no vector or one from another model."""
    from tqdm import tqdm

    from .knowledge import count_needing_embedding, reembed_batch

    runtime = _runtime()
    with runtime.session() as session:
        todo = count_needing_embedding(session, runtime.embedder.model_name)
    done = 0
    with tqdm(total=todo, unit="article", desc="re-embedding", disable=todo == 0) as bar:
        while True:
            with runtime.session() as session:  # one commit per batch: progress survives a crash
                count = reembed_batch(session, runtime.embedder, batch_size=batch_size, on_progress=bar.update)
            if not count:
                break
            done += count
    click.echo(f"re-embedded {done} articles with {runtime.embedder.model_name}")


@main.command()
@click.argument("text")
@click.option("--subject", help="Ticket subject (default: the first line of TEXT).")
@click.option("--json", "as_json", is_flag=True, help="Print the stored ticket as JSON.")
def ask(text: str, subject: str | None, as_json: bool) -> None:
    """Submit a ticket and print the answer, its mode and the cited articles with scores."""
    from .ticket_queries import get_ticket
    from .tickets import answer_ticket

    runtime = _runtime()
    subject = subject or text.strip().splitlines()[0][:300] if text.strip() else subject
    ticket_id = answer_ticket(runtime, runtime.chat, {"subject": subject or "", "body": text})
    with runtime.session() as session:
        ticket = get_ticket(session, ticket_id)
    if as_json:
        click.echo(json.dumps(ticket.to_dict(), indent=2))
        return
    click.echo(f"ticket {ticket.id}: {ticket.status} (mode: {ticket.mode}; {ticket.reason})\n")
    click.echo(ticket.answer or "")
    if ticket.citations:
        click.echo("\nretrieved articles:")
    for c in ticket.citations:
        mark = "cited" if c["cited"] else "     "
        click.echo(f"  [{c['rank']}] {mark} {c['title']}  score {c['score']:.4f} (similarity {c['similarity']:.4f}, "
                   f"recency {c['recency']:.4f}, importance {c['importance']:.2f})")


@main.command()
@click.option("--days", default=30, show_default=True, type=int)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def gaps(days: int, as_json: bool) -> None:
    """Handed-off or unhelpful recent tickets, grouped by nearest article: what to write next."""
    from .ticket_queries import content_gaps

    runtime = _runtime()
    with runtime.session() as session:
        groups = content_gaps(session, days=days)
    if as_json:
        click.echo(json.dumps(groups, indent=2))
        return
    if not groups:
        click.echo(f"no handed-off or unhelpful tickets in the last {days} days")
    for group in groups:
        nearest = group["nearest_article"]
        label = f"{nearest['title']} [{nearest['category'] or '-'}]" if nearest else "(no article retrieved)"
        click.echo(f"{group['tickets']:4d} tickets  nearest: {label}  "
                   f"(needs agent {group['needs_agent']}, not helpful {group['not_helpful']})")
        for example in group["examples"]:
            click.echo(f"        - {example}")


@main.command("eval")
@click.argument("corpus", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("queries", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("qrels", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--mode", "modes", multiple=True, type=click.Choice(["vector", "lexical", "hybrid"]),
              help="Retrieval mode(s) to measure (repeatable; default RETRIEVAL_MODE).")
@click.option("--fusion", type=click.Choice(["convex", "rrf"]), help="Override FUSION_METHOD.")
@click.option("--vector-weight", type=float, help="Override HYBRID_VECTOR_WEIGHT.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (one per mode, keyed by mode, if several).")
def eval_command(corpus: Path, queries: Path, qrels: Path, modes: tuple[str, ...], fusion: str | None,
                 vector_weight: float | None, as_json: bool) -> None:
    """Measure search on CORPUS.jsonl / QUERIES.jsonl / QRELS.tsv in a throwaway schema."""
    from dataclasses import replace

    from tqdm import tqdm

    from .evaluation import evaluate_settings, load_eval_set

    eval_set = load_eval_set(corpus, queries, qrels)
    runtime = _runtime(seed=False)
    base = runtime.retrieval
    if fusion:
        base = replace(base, fusion=fusion)
    if vector_weight is not None:
        base = replace(base, vector_weight=vector_weight)
    variants = {mode: replace(base, mode=mode) for mode in (modes or (base.mode,))}
    bars = {"corpus": tqdm(total=len(eval_set.corpus), desc="embedding corpus", disable=as_json, file=sys.stderr),
            "queries": tqdm(total=len(eval_set.queries) * len(variants), desc="querying", disable=as_json,
                            file=sys.stderr)}
    scores = evaluate_settings(runtime, eval_set, variants, on_progress=lambda stage, n: bars[stage].update(n))
    for bar in bars.values():
        bar.close()
    if as_json:
        click.echo(json.dumps(next(iter(scores.values())) if len(scores) == 1 else scores))
        return
    keys = ["ndcg@10", "recall@3", "success@3", "mrr@10", "queries"]
    click.echo(f"{'mode':>8}  " + "  ".join(f"{key:>9}" for key in keys))
    for mode, metrics in scores.items():
        click.echo(f"{mode:>8}  " + "  ".join(
            f"{metrics[key]:9.4f}" if isinstance(metrics[key], float) else f"{metrics[key]:>9}" for key in keys))


def _register_auth_commands() -> None:
    """``admin`` and ``token`` live in cli_auth.py to keep this module short."""
    from .cli_auth import admin, token

    main.add_command(admin)
    main.add_command(token)


_register_auth_commands()


def _register_synonym_commands() -> None:
    """``synonyms`` lives in cli_synonyms.py."""
    from .cli_synonyms import synonyms

    main.add_command(synonyms)


_register_synonym_commands()
