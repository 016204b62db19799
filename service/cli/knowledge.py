"""Knowledge-base commands: add, import, search, stats, reembed, eval."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import click
from tqdm import tqdm

from service.cli.context import connect
from service.knowledge.articles import (
    add_article,
    count_needing_embedding,
    knowledge_stats,
    reembed_batch,
    refresh_reembedded_statistics,
)
from service.knowledge.versions import ChangeContext
from service.knowledge.importer import import_path
from service.retrieval.evaluation import evaluate_settings, load_eval_set
from service.retrieval.search import run_search


def _print_results(results, weights, as_json: bool, *, explain: bool = False) -> None:
    """Print ranked results with their score breakdown (or JSON)."""
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
            click.echo(f"   vector rank {e.vector_rank}, lexical rank {e.lexical_rank}, "
                       f"matched terms: {', '.join(e.matched_terms) or '-'}")
        click.echo(f"   {r.snippet}")


@click.command()
@click.option("--title", required=True)
@click.option("--content", help="Article text (or use --file).")
@click.option("--file", "file_", type=click.File("r", encoding="utf-8"),
              help="Read the content from a file ('-' for stdin).")
@click.option("--category")
@click.option("--importance", type=float, default=1.0, show_default=True)
def add(title: str, content: str | None, file_, category: str | None, importance: float) -> None:
    """Add one article and embed it."""
    if (content is None) == (file_ is None):
        raise click.UsageError("give exactly one of --content or --file")
    runtime = connect()
    with runtime.session() as session:
        article = add_article(session, runtime.embedder, {
            "title": title, "content": content if content is not None else file_.read(),
            "category": category, "importance": importance,
        }, change=ChangeContext("cli", "cli"))
    click.echo(f"added article {article.id} ({article.embedding_status})")
    if article.embedding_error:
        click.echo(f"embedding pending: {article.embedding_error}; run 'supportrag reembed' later", err=True)


@click.command("import")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--prune", is_flag=True, help="Delete articles imported from PATH whose file (or line) is gone.")
@click.option("--category", help="Category for files whose front matter names none (instead of their folder).")
def import_command(path: Path, prune: bool, category: str | None) -> None:
    """Import PATH: a markdown file, a folder of them (recursively) or a .jsonl; unchanged files are skipped."""
    runtime = connect()
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


@click.command()
@click.argument("query")
@click.option("--limit", default=3, show_default=True, type=int)
@click.option("--mode", type=click.Choice(["vector", "lexical", "hybrid"]), help="Override RETRIEVAL_MODE.")
@click.option("--explain", is_flag=True, help="Show each leg's rank and the matched terms.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def search(query: str, limit: int, mode: str | None, explain: bool, as_json: bool) -> None:
    """Rank articles for QUERY and show the score breakdown."""
    runtime = connect()
    retrieval = replace(runtime.retrieval, mode=mode) if mode else runtime.retrieval
    with runtime.session() as session:
        outcome = run_search(session, runtime.embedder, query, limit=limit, weights=runtime.weights,
                             retrieval=retrieval)
    if outcome.degraded and not as_json:
        click.echo(f"(degraded: {outcome.degraded}; keyword search only)", err=True)
    _print_results(outcome.results, runtime.weights, as_json, explain=explain)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def stats(as_json: bool) -> None:
    """Count articles by embedding state; show the model and the vector index."""
    runtime = connect()
    with runtime.session() as session:
        data = knowledge_stats(session, runtime.embedder.model_name)
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    for key in ("articles", "embedded", "pending", "stale", "model"):
        click.echo(f"{key:>9}: {data[key]}")
    sections = data["sections"]
    click.echo(f"{'sections':>9}: {sections['total']} ({sections['embedded']} embedded, {sections['pending']} pending)")
    click.echo(f"{'index':>9}: {data['index']['definition'] if data['index'] else 'none'}")


@click.command()
@click.option("--batch-size", default=64, show_default=True, type=int)
def reembed(batch_size: int) -> None:
    """Embed articles that have no vector or one from another model."""
    runtime = connect()
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
    with runtime.session() as session:  # a model switch rewrites every vector: plan searches on fresh statistics
        refresh_reembedded_statistics(session, done)
    click.echo(f"re-embedded {done} articles with {runtime.embedder.model_name}")


@click.command("eval")
@click.argument("corpus", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("queries", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("qrels", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--mode", "modes", multiple=True, type=click.Choice(["vector", "lexical", "hybrid"]),
              help="Retrieval mode(s) to measure (repeatable; default RETRIEVAL_MODE).")
@click.option("--fusion", type=click.Choice(["convex", "rrf", "minmax", "zscore"]), help="Override FUSION_METHOD.")
@click.option("--vector-weight", type=float, help="Override HYBRID_VECTOR_WEIGHT.")
@click.option("--granularity", type=click.Choice(["section", "article"]), help="Override RETRIEVAL_GRANULARITY.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object (one per mode, keyed by mode, if several).")
@click.option("--answerability", type=float, metavar="FRACTION",
              help="Hold back this fraction of the articles and measure the answer gate instead (issue 34).")
@click.option("--seed", type=int, default=0, show_default=True, help="With --answerability: the hold-back seed.")
@click.option("--attempts-out", type=click.Path(dir_okay=False, path_type=Path),
              help="With --answerability: save every attempt's features and label (for `gate fit-default`).")
def eval_command(corpus: Path, queries: Path, qrels: Path, modes: tuple[str, ...], fusion: str | None,
                 vector_weight: float | None, granularity: str | None, as_json: bool,
                 answerability: float | None, seed: int, attempts_out: Path | None) -> None:
    """Measure search on CORPUS.jsonl / QUERIES.jsonl / QRELS.tsv in a throwaway schema."""
    eval_set = load_eval_set(corpus, queries, qrels)
    if answerability is not None:
        from service.cli.gate import run_answerability  # here: scikit-learn only for this variant
        run_answerability(eval_set, answerability, seed, attempts_out=attempts_out, as_json=as_json)
        return
    runtime = connect(seed=False)
    base = runtime.retrieval
    if fusion:
        base = replace(base, fusion=fusion)
    if vector_weight is not None:
        base = replace(base, vector_weight=vector_weight)
    if granularity:
        base = replace(base, granularity=granularity)
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
