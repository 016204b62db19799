"""The knowledge loop's pure parts, table-driven and without a database: PII scrubbing, the importance rule,
the deduplication verdict, the what-if re-ranking and the LLM rewrite's parsing."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from service.config import ConfigError, Settings
from service.knowledge.importance_rule import (
    OutcomeCounts,
    RuleSettings,
    mean_solve_rate,
    propose_importance,
)
from service.knowledge.rewriting import parse_rewrite
from service.knowledge.scrubbing import candidate_title, decide_dedup, scrub_personal_data, template_body
from service.providers.llm import LLMError
from service.retrieval.preview import Preview
from service.retrieval.what_if import rank_with_importance


@pytest.mark.parametrize("text, expected", [
    ("Write to jane.doe+shop@mail.example.co.uk today", "Write to [email] today"),
    ("Call +1 (555) 123-4567 or 555-123-4567", "Call [phone] or [phone]"),
    ("Call us on 020 7946 0958", "Call us on [phone]"),
    ("Order 123456789 was refunded", "Order [number] was refunded"),
    ("Card 4111 1111 1111 1111 expired", "Card [number] expired"),
    ("Order AB1234567 shipped", "Order [number] shipped"),
    ("Mobile 0612345678", "Mobile [number]"),
    ("About T-42: done", "About [ticket]: done"),
    ("Your ticket #42 is closed", "Your [ticket] is closed"),
    # Not personal data: short numbers, ranges, versions, years, steps.
    ("Refunds take 5-10 business days, within 30 days", "Refunds take 5-10 business days, within 30 days"),
    ("Version 1.2.3 from 2024, step 4 of 5", "Version 1.2.3 from 2024, step 4 of 5"),
    ("Go to Account > Orders", "Go to Account > Orders"),
    ("Ticket T-7 is another customer's", "Ticket [ticket] is another customer's"),
])
def test_personal_data_is_scrubbed_and_ordinary_numbers_are_kept(text, expected):
    assert scrub_personal_data(text, ticket_id=42) == expected


MEAN = 0.5


@pytest.mark.parametrize("counts, current, expected, reason", [
    # Below the minimum number of outcomes: nothing, however lopsided.
    (OutcomeCounts(solved=4), 1.0, None, "fewer than 5 outcomes"),
    (OutcomeCounts(escalated=2, not_helpful=2), 1.0, None, "fewer than 5 outcomes"),
    # 5 solved of 5: smoothed (5 + 5×0.5)/10 = 0.75; step 2×0.25 = 0.5, capped at 0.25.
    (OutcomeCounts(solved=5), 1.0, 1.25, "solved more often than the mean"),
    # 5 escalated of 5: smoothed 0.25, step capped at −0.25.
    (OutcomeCounts(escalated=5), 1.0, 0.75, "solved less often than the mean"),
    (OutcomeCounts(escalated=3, not_helpful=2), 1.0, 0.75, "solved less often than the mean"),
    # 4 of 6: smoothed (4 + 2.5)/11 = 0.591; step 0.182 → 1.18.
    (OutcomeCounts(solved=4, escalated=2), 1.0, 1.18, "solved more often than the mean"),
    # At the mean: no proposal.
    (OutcomeCounts(solved=3, escalated=3), 1.0, None, "close to the knowledge base's mean"),
    # 3 of 5: (3 + 2.5)/10 = 0.55, step 0.1 → 1.1.
    (OutcomeCounts(solved=3, escalated=2), 1.0, 1.1, "solved more often than the mean"),
    # 11 of 21: (11 + 2.5)/26 = 0.519, step 0.038, under the 0.05 worth proposing.
    (OutcomeCounts(solved=11, escalated=10), 1.0, None, "close to the knowledge base's mean"),
    # Bounds: never above 2 or below 0.
    (OutcomeCounts(solved=20), 1.9, 2.0, "solved more often than the mean"),
    (OutcomeCounts(solved=20), 2.0, None, "close to the knowledge base's mean"),
    (OutcomeCounts(escalated=20), 0.1, 0.0, "solved less often than the mean"),
    # Agent drafts count: unchanged as good, replaced as bad.
    (OutcomeCounts(drafts_unchanged=5), 1.0, 1.25, "solved more often than the mean"),
    (OutcomeCounts(drafts_replaced=5), 1.0, 0.75, "solved less often than the mean"),
    (OutcomeCounts(solved=2, drafts_replaced=3), 1.0, 0.9, "solved less often than the mean"),
])
def test_the_rule_proposes_a_capped_step_toward_the_smoothed_solve_rate(counts, current, expected, reason):
    decision = propose_importance(counts, current, MEAN, RuleSettings(min_outcomes=5, max_step=0.25))
    assert decision.proposed_importance == expected
    assert decision.reason == reason
    assert decision.outcomes == counts.total


@pytest.mark.parametrize("rule, counts, expected", [
    (RuleSettings(min_outcomes=3, max_step=0.25), OutcomeCounts(solved=3), 1.25),  # proposed from 3 outcomes
    (RuleSettings(min_outcomes=5, max_step=0.1), OutcomeCounts(solved=5), 1.1),
    (RuleSettings(min_outcomes=10, max_step=0.25), OutcomeCounts(solved=9), None),
])
def test_the_minimum_and_the_step_cap_are_settings(rule, counts, expected):
    proposed = propose_importance(counts, 1.0, MEAN, rule).proposed_importance
    assert proposed == (pytest.approx(expected, abs=0.011) if expected is not None else None)


@pytest.mark.parametrize("all_counts, expected", [
    ([], 0.5),
    ([OutcomeCounts(solved=3, escalated=1)], 0.75),
    ([OutcomeCounts(solved=1), OutcomeCounts(escalated=1, not_helpful=2)], 0.25),
    ([OutcomeCounts(drafts_unchanged=1, drafts_replaced=1)], 0.5),
])
def test_the_mean_is_the_knowledge_base_solve_rate_over_all_outcomes(all_counts, expected):
    assert mean_solve_rate(all_counts) == expected


def test_a_high_mean_makes_an_average_article_go_down():
    """Relative to the knowledge base: 60 % solved is poor when the others solve 90 %."""
    decision = propose_importance(OutcomeCounts(solved=6, escalated=4), 1.0, 0.9)
    assert decision.proposed_importance is not None and decision.proposed_importance < 1.0


@pytest.mark.parametrize("similarity, threshold, action", [
    (None, 0.7, "new"),  # an empty knowledge base
    (0.2, 0.7, "new"),
    (0.6999, 0.7, "new"),
    (0.7, 0.7, "add_to"),
    (0.93, 0.7, "add_to"),
    (0.93, 0.95, "new"),
])
def test_dedup_sends_a_candidate_to_add_to_at_or_above_the_threshold(similarity, threshold, action):
    decision = decide_dedup(similarity, threshold)
    assert (decision.action, decision.similarity) == (action, similarity)


@pytest.mark.parametrize("question, title", [
    ("how do I change my delivery address?", "How do I change my delivery address?"),
    ("\n\n  second line first\nmore", "Second line first"),
    ("word " * 40, "Word" + " word" * 23 + "…"),
])
def test_the_title_is_the_question_first_line_cut_at_a_word(question, title):
    assert candidate_title(question) == title


def test_the_template_body_is_the_replies_as_paragraphs():
    assert template_body(["  First. ", "", "Second."]) == "First.\n\nSecond."


@pytest.mark.parametrize("text, ok", [
    ('{"title": "T", "body": "B"}', True),
    ('```json\n{"title": "T", "body": "B"}\n```', True),
    ('{"title": "T"}', False),
    ('{"title": "", "body": "B"}', False),
    ("not json", False),
    ('["title", "body"]', False),
])
def test_the_rewrite_must_be_a_json_object_with_title_and_body(text, ok):
    if ok:
        assert (parse_rewrite(text).title, parse_rewrite(text).body) == ("T", "B")
    else:
        with pytest.raises(LLMError):
            parse_rewrite(text)


WEIGHTS = {"similarity_weight": 0.8, "recency_weight": 0.2, "recency_window_days": 365.0}


def _row(article_id: int, relevance: float, importance: float = 1.0, recency: float = 1.0) -> dict:
    score = relevance * 0.8 + recency * 0.2 * importance
    return {"id": article_id, "title": f"A{article_id}", "relevance": relevance, "recency": recency,
            "importance": importance, "score": score}


def _preview(results: list[dict], article: dict | None) -> Preview:
    ranked = [{**r, "rank": i} for i, r in enumerate(sorted(results, key=lambda r: -r["score"]), start=1)]
    return Preview("q", "vector", None, 5, WEIGHTS, datetime.now(timezone.utc), ranked, article)


@pytest.mark.parametrize("relevances, target, importance, rank_now, rank_then", [
    ([0.80, 0.78, 0.50], 2, 1.25, 2, 1),  # +0.05 overtakes a 0.016 lead
    ([0.80, 0.70, 0.50], 2, 1.25, 2, 2),  # not enough
    ([0.80, 0.78, 0.50], 1, 0.75, 1, 2),  # down, overtaken
    ([0.80, 0.78, 0.50], 3, 2.0, 3, 3),
])
def test_the_what_if_re_ranks_with_only_the_articles_score_changed(relevances, target, importance, rank_now,
                                                                   rank_then):
    results = [_row(i, rel) for i, rel in enumerate(relevances, start=1)]
    preview = _preview(results, None)
    article = next(r for r in preview.results if r["id"] == target)
    what_if = rank_with_importance(_preview(results, article), target, importance)
    assert (what_if.rank_now, what_if.rank_then) == (rank_now, rank_then)
    assert what_if.score_then == pytest.approx(relevances[target - 1] * 0.8 + 0.2 * importance)
    assert [r["id"] for r in what_if.ranking_then][rank_then - 1] == target


def test_the_what_if_says_why_when_the_article_has_no_breakdown():
    note = "not embedded with the active model, so search never returns it"
    what_if = rank_with_importance(_preview([_row(1, 0.8)], {"id": 2, "relevance": None, "note": note}), 2, 1.5)
    assert (what_if.rank_then, what_if.note) == (None, note)


@pytest.mark.parametrize("env, problem", [
    ({"IMPORTANCE_WINDOW_DAYS": "0"}, "IMPORTANCE_WINDOW_DAYS"),
    ({"IMPORTANCE_MIN_OUTCOMES": "0"}, "IMPORTANCE_MIN_OUTCOMES"),
    ({"IMPORTANCE_MAX_STEP": "0"}, "IMPORTANCE_MAX_STEP"),
    ({"IMPORTANCE_MAX_STEP": "2.5"}, "IMPORTANCE_MAX_STEP"),
    ({"CANDIDATE_DEDUP_THRESHOLD": "1.5"}, "CANDIDATE_DEDUP_THRESHOLD"),
    ({"CANDIDATE_ALSO_ASKED_THRESHOLD": "-2"}, "CANDIDATE_ALSO_ASKED_THRESHOLD"),
])
def test_knowledge_loop_settings_out_of_range_are_refused(env, problem):
    with pytest.raises(ConfigError, match=problem):
        Settings.from_env(env)


def test_knowledge_loop_settings_come_from_the_environment():
    settings = Settings.from_env({"IMPORTANCE_WINDOW_DAYS": "7", "IMPORTANCE_MIN_OUTCOMES": "3",
                                  "IMPORTANCE_MAX_STEP": "0.1", "CANDIDATE_DEDUP_THRESHOLD": "0.8",
                                  "CANDIDATE_ALSO_ASKED_THRESHOLD": "0.75"})
    assert (settings.importance_window_days, settings.importance_min_outcomes, settings.importance_max_step,
            settings.candidate_dedup_threshold, settings.candidate_also_asked_threshold) == (7, 3, 0.1, 0.8, 0.75)
    assert (Settings().candidate_dedup_threshold, Settings().importance_min_outcomes) == (0.62, 5)
