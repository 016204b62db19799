"""Real embeddings for the benchmarks: MiniLM vectors of real short texts, grouped into articles.

The texts are the one-line package summaries of the npm registry list on this machine (``--source``; one
summary per line, the fourth tab-separated field): real, short, topically diverse prose, as help-center
sections are. They are embedded once with the product's own embedder (``LocalEmbedder``) and cached as
``.npy`` under ``artifacts/realdata/`` (git-ignored), keyed by source, size and seed.

Articles: a random unassigned text seeds an article, and its nearest unassigned neighbours become its other
vectors (card first, then sections), so an article's vectors share a topic as a real article's do. Queries are
held-out texts of the same source, never in the corpus.

    python bench/realdata.py --vectors 60000 --queries 200   # embed and cache (a few minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = Path("/work/.library/env/packages/npm.tsv")
CACHE = ROOT / "artifacts" / "realdata"
MIN_CHARS = 30  # shorter summaries are mostly placeholders ("test", "my package")


@dataclass(frozen=True)
class RealVectors:
    """Unit MiniLM vectors (float32, 384-d) of corpus texts and of held-out query texts."""

    corpus: np.ndarray
    queries: np.ndarray
    corpus_texts: list[str]
    query_texts: list[str]


def read_texts(source: Path) -> list[str]:
    """Distinct summaries of at least ``MIN_CHARS`` characters, in file order."""
    seen: set[str] = set()
    texts = []
    with source.open(encoding="utf-8", errors="replace") as lines:
        next(lines)  # header
        for line in lines:
            fields = line.rstrip("\n").split("\t")
            text = fields[3].strip() if len(fields) > 3 else ""
            key = text.lower()
            if len(text) >= MIN_CHARS and key not in seen:
                seen.add(key)
                texts.append(text)
    return texts


def _cache_path(source: Path, vectors: int, queries: int, seed: int) -> Path:
    digest = hashlib.sha256(f"{source.resolve()}|{source.stat().st_size}".encode()).hexdigest()[:10]
    return CACHE / f"{source.stem}-{digest}-{vectors}-{queries}-{seed}.npz"


def load_real_vectors(vectors: int, queries: int, *, seed: int = 7, source: Path = DEFAULT_SOURCE) -> RealVectors:
    """``vectors`` corpus vectors and ``queries`` held-out query vectors, embedded once and cached."""
    path = _cache_path(source, vectors, queries, seed)
    texts = read_texts(source)
    if vectors + queries > len(texts):
        raise SystemExit(f"{source} has {len(texts)} usable texts, fewer than {vectors + queries}")
    picks = np.random.default_rng(seed).permutation(len(texts))[: vectors + queries]
    chosen = [texts[i] for i in picks]
    if path.exists():
        stored = np.load(path)
        embedded = stored["vectors"]
    else:
        # Here, not at the top: the embedder imports torch, which only a cache miss needs.
        from service.providers.embeddings import LocalEmbedder

        started = time.perf_counter()
        embedded = LocalEmbedder(batch_size=128).embed(chosen).astype(np.float32)
        print(f"embedded {len(chosen)} texts in {time.perf_counter() - started:.0f} s -> {path}")
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, vectors=embedded)
    return RealVectors(corpus=embedded[:vectors], queries=embedded[vectors:], corpus_texts=chosen[:vectors],
                       query_texts=chosen[vectors:])


def group_into_articles(vectors: np.ndarray, per_article: int, *, seed: int = 7) -> np.ndarray:
    """Row indices of shape (len(vectors) // per_article, per_article): a random seed text and its nearest
    unassigned neighbours, greedily (each text in one article). Cached beside the vectors (minutes of work)."""
    digest = hashlib.sha256(vectors[:: max(1, len(vectors) // 64)].tobytes()).hexdigest()[:10]
    path = CACHE / f"groups-{digest}-{len(vectors)}-{per_article}-{seed}.npy"
    if path.exists():
        return np.load(path)
    groups = _group(vectors, per_article, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, groups)
    return groups


def _group(vectors: np.ndarray, per_article: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    count = len(vectors) // per_article
    free = np.ones(len(vectors), dtype=bool)
    groups = np.empty((count, per_article), dtype=np.int64)
    for article, start in enumerate(rng.permutation(len(vectors))):
        if article == count:
            break
        if not free[start]:
            start = int(rng.choice(np.flatnonzero(free)))
        sims = vectors @ vectors[start]
        sims[~free] = -np.inf
        sims[start] = np.inf  # the seed is the card
        members = np.argpartition(-sims, per_article - 1)[:per_article]
        members = members[np.argsort(-sims[members])]
        groups[article] = members
        free[members] = False
    return groups


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vectors", type=int, default=60_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    args = parser.parse_args()
    real = load_real_vectors(args.vectors, args.queries, seed=args.seed, source=args.source)
    print(f"{len(real.corpus)} corpus vectors, {len(real.queries)} queries, e.g. {real.query_texts[0]!r}")


if __name__ == "__main__":
    main()
