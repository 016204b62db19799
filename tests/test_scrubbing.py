"""Issue 33 item 3: scrubbing that knows names, on a corpus of realistic replies (0 leaks)."""

from __future__ import annotations

import pytest

from service.knowledge.scrubbing import scrub_reply

from .scrub_corpus import CORPUS


def test_the_corpus_is_large_enough():
    assert len(CORPUS) >= 40


@pytest.mark.parametrize("case", CORPUS, ids=lambda case: case.text[:40])
def test_a_scrubbed_reply_leaks_nothing_and_keeps_the_help(case):
    scrubbed = scrub_reply(case.text, names=case.names)
    assert [leak for leak in case.leaks if leak.lower() in scrubbed.lower()] == []
    assert case.kept in scrubbed


def test_the_corpus_as_a_whole_has_zero_leaks():
    leaks = [(case.text[:30], leak) for case in CORPUS for leak in case.leaks
             if leak.lower() in scrub_reply(case.text, names=case.names).lower()]
    assert leaks == []


@pytest.mark.parametrize("text, kept", [
    ("Thanks for writing!\nTo reset your password, open Settings and choose Reset.\nIt takes a minute.",
     "open Settings and choose Reset"),
    ("Hello! Exports run every night at 2 am.", "Exports run every night at 2 am."),
    ("Our office hours are 9-17 on weekdays.", "Our office hours are 9-17 on weekdays."),
])
def test_help_without_personal_data_is_kept(text, kept):
    assert kept in scrub_reply(text)
