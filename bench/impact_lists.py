"""Would impact-ordered lists ("champion lists", threshold algorithm) cut the lexical tail at 100k × 5? Measured
before building them, on the same synthetic corpus as bench/bm25_search.py, in numpy.

The corpus is bm25_search.py's law: articles of 5 sections of 40–119 words and a 6-word title, words drawn from a
Zipf law (s = 1.1 over 50,000 words, the tail clipped into the last one); queries of 2–6 words from the same law.
Scores are the lexical leg's BM25 (k1 1.2, b 0.75, a card is its title, weighted 3, and its sections' words; an
article scores its best unit).

The design measured: for every term, its units sorted by impact (idf × the term-frequency part) and the best
``max(min_size, fraction × df)`` of them kept in a list; a term whose df is within that is listed whole. A unit in
no list scores at most τ = Σ over the query's terms of the impact just past the list (the *tail*). Reading only
the lists gives each candidate article a lower bound (the terms it was seen with, exactly) and an upper bound
(those plus the tails of the terms it was not seen with). The search is exact and pruned when θ, the k-th best
lower bound, is above τ: every article outside the lists scores below the k-th best. Otherwise it must fall back
to scoring every match (today's tail).

Per configuration: on how many queries the lists suffice (with the true k-th best score and with the lower bound
a search can know), how many articles the lists name, and how many would then be scored exactly.

    python bench/impact_lists.py --articles 100000 --queries 40
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from benchlib import machine_facts, report

RESULTS = Path(__file__).resolve().parent / "results" / "impact_lists.jsonl"
VOCABULARY, ZIPF, SECTIONS, TITLE_WORDS = 50_000, 1.1, 5, 6
K1, B, TITLE_WEIGHT = 1.2, 0.75, 3.0
CONFIGURATIONS = ((500, 0.0), (2000, 0.0), (8000, 0.0), (1000, 0.05), (2000, 0.1))


def postings_of(units: np.ndarray, words: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, ...]:
    """(unit, word, summed weight) for each distinct (unit, word)."""
    keys, inverse = np.unique(units.astype(np.int64) * (VOCABULARY + 1) + words, return_inverse=True)
    return keys // (VOCABULARY + 1), keys % (VOCABULARY + 1), np.bincount(inverse, weights=weights)


def corpus(articles: int, rng: np.random.Generator) -> dict:
    """Every posting with its impact (idf excluded), sorted by term then impact, best first."""
    lengths = rng.integers(40, 120, size=articles * SECTIONS)
    words = np.minimum(rng.zipf(ZIPF, lengths.sum()), VOCABULARY)
    section_of = np.repeat(np.arange(articles * SECTIONS), lengths)
    titles = np.minimum(rng.zipf(ZIPF, articles * TITLE_WORDS), VOCABULARY)
    title_of = np.repeat(np.arange(articles), TITLE_WORDS)
    section, section_word, section_tf = postings_of(section_of, words, np.ones(len(words)))
    card, card_word, card_tf = postings_of(np.concatenate([section_of // SECTIONS, title_of]),
                                           np.concatenate([words, titles]),
                                           np.concatenate([np.ones(len(words)), np.full(len(titles), TITLE_WEIGHT)]))
    card_length = np.bincount(section_of // SECTIONS, minlength=articles) + TITLE_WORDS
    units = articles * (1 + SECTIONS)  # unit ids: cards 0..A-1, then sections
    unit = np.concatenate([card, articles + section])
    word = np.concatenate([card_word, section_word])
    tf = np.concatenate([card_tf, section_tf])
    length = np.concatenate([card_length[card], lengths[section]]).astype(float)
    avgdl = (card_length.sum() + lengths.sum()) / units
    impact = tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avgdl))
    df = np.bincount(word, minlength=VOCABULARY + 1)
    order = np.lexsort((-impact, word))
    unit_ids = np.arange(units)
    return {"articles": articles, "units": units, "unit": unit[order], "word": word[order], "impact": impact[order],
            "df": df, "idf": np.log(1 + (units - df + 0.5) / (df + 0.5)),
            "starts": np.searchsorted(word[order], np.arange(VOCABULARY + 2)),
            "article_of": np.where(unit_ids < articles, unit_ids, (unit_ids - articles) // SECTIONS)}


def per_article(c: dict, values: np.ndarray) -> np.ndarray:
    best = np.zeros(c["articles"])
    np.maximum.at(best, c["article_of"], values)
    return best


def one_query(c: dict, terms: list[int], k: int, min_size: int, fraction: float) -> dict:
    units, starts, unit, impact, idf, df = c["units"], c["starts"], c["unit"], c["impact"], c["idf"], c["df"]
    exact, lower, covered, seen = np.zeros(units), np.zeros(units), np.zeros(units), np.zeros(units, bool)
    tau = 0.0
    for t in terms:
        every = slice(starts[t], starts[t + 1])
        np.add.at(exact, unit[every], idf[t] * impact[every])
        size = max(min_size, int(df[t] * fraction))
        kept = min(starts[t + 1] - starts[t], size)
        tail = idf[t] * impact[starts[t] + size] if starts[t + 1] - starts[t] > size else 0.0
        tau += tail
        listed = slice(starts[t], starts[t] + kept)
        lower[unit[listed]] += idf[t] * impact[listed]
        covered[unit[listed]] += tail
        seen[unit[listed]] = True
    theta = np.sort(per_article(c, exact))[-k]
    theta_known = np.sort(per_article(c, lower))[-k]
    upper = per_article(c, np.where(seen, lower + tau - covered, tau))
    return {"pruned_true": bool(theta > tau), "pruned_known": bool(theta_known > tau),
            "named": int(np.unique(c["article_of"][seen]).size), "scored": int((upper >= theta_known).sum()),
            "terms": [(int(t), int(df[t])) for t in terms], "theta": round(float(theta), 3),
            "theta_known": round(float(theta_known), 3), "tau": round(float(tau), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--articles", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=40)
    args = parser.parse_args()
    started = time.perf_counter()
    c = corpus(args.articles, np.random.default_rng(42))
    query_rng = np.random.default_rng(7)
    queries = []
    for _ in range(args.queries):
        drawn = np.unique(np.minimum(query_rng.zipf(ZIPF, int(query_rng.integers(2, 7))), VOCABULARY))
        queries.append([int(t) for t in drawn if c["df"][t] > 0])
    result: dict = {"articles": args.articles, "units": c["units"], "postings": int(len(c["unit"])),
                    "queries": args.queries, "load_average": [round(x, 2) for x in os.getloadavg()]}
    for min_size, fraction in CONFIGURATIONS:
        for k in (10, 100):
            runs = [one_query(c, terms, k, min_size, fraction) for terms in queries]
            label = f"lists_{min_size}_{fraction:g}_k{k}"
            result[label] = {
                "pruned_with_true_theta": sum(r["pruned_true"] for r in runs),
                "pruned_with_known_theta": sum(r["pruned_known"] for r in runs),
                "named_articles_median": int(np.median([r["named"] for r in runs])),
                "scored_when_pruned_median": int(np.median([r["scored"] for r in runs if r["pruned_known"]] or [0])),
                "cut_list_entries": int(sum(max(min_size, int(d * fraction)) for d in c["df"]
                                            if d > max(min_size, int(d * fraction)))),
                "falls_back_on": [r["terms"] for r in runs if not r["pruned_known"]][:5]}
            print(label, {key: value for key, value in result[label].items() if key != "falls_back_on"}, flush=True)
    result["seconds"] = round(time.perf_counter() - started, 1)
    result.update(machine_facts())
    report(RESULTS, result)


if __name__ == "__main__":
    main()
