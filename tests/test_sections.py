"""Splitting articles into sections: headings (not inside code fences), windows for long ones, tiny ones merged."""

from __future__ import annotations

import pytest

from service.knowledge.sections import (
    MIN_SECTION_WORDS,
    card_embedding_text,
    section_embedding_text,
    split_sections,
)


def one_token_per_word(words):
    """A tokenizer stand-in: every word is one token."""
    return [1 for _ in words]


def split(content: str, title: str = "Payments", window: int = 200, kind: str = "text"):
    """The drafts of one kind ("text" or "heading")."""
    drafts = split_sections(title, content, window_tokens=window, count_tokens=one_token_per_word)
    return [draft for draft in drafts if draft.kind == kind]


def words(n: int, prefix: str = "w") -> str:
    return " ".join(f"{prefix}{i}" for i in range(n))


LEAD = "You can pay by card, PayPal or gift card, and we never store your full card number anywhere."


@pytest.mark.parametrize(("content", "expected_paths"), [
    (LEAD, [()]),
    (f"{LEAD}\n\n## Payment declined?\n{LEAD}", [(), ("Payment declined?",)]),
    (f"## Cards\n{LEAD}\n### Declined\n{LEAD}\n## PayPal\n{LEAD}",
     [("Cards",), ("Cards", "Declined"), ("PayPal",)]),
    # A heading inside a fenced code block is code, not a section.
    (f"## Setup\n{LEAD}\n```bash\n# install the tool\nmake\n```\n{LEAD}", [("Setup",)]),
    (f"## Setup\n{LEAD}\n~~~\n## not a heading\n~~~\n{LEAD}", [("Setup",)]),
    # Closing hashes and up to three leading spaces are still a heading; four spaces are not.
    (f"   ## Spaced ##\n{LEAD}\n    ## indented code\n{LEAD}", [("Spaced",)]),
    # An H1 that repeats the title opens the lead rather than a section.
    (f"# Payments\n\n{LEAD}\n\n## Refunds\n{LEAD}", [(), ("Refunds",)]),
])
def test_headings_outside_code_fences_give_the_section_paths(content, expected_paths):
    assert [d.heading_path for d in split(content)] == expected_paths


def test_a_section_with_too_few_words_joins_the_next_one():
    content = f"## Billing\nSee below.\n## Declined cards\n{LEAD}"
    drafts = split(content)
    assert len(drafts) == 1
    assert drafts[0].heading_path == ("Declined cards",)
    assert "See below." in drafts[0].text and LEAD in drafts[0].text


def test_a_tiny_last_section_joins_the_previous_one():
    content = f"## Cards\n{LEAD}\n## Contact\nCall us."
    drafts = split(content)
    assert [d.heading_path for d in drafts] == [("Cards",)]
    assert drafts[0].text.endswith("Call us.")
    assert len("Call us.".split()) < MIN_SECTION_WORDS


def test_spans_point_at_the_section_text_in_the_content():
    content = f"{LEAD}\n\n## Payment declined?\n\n{LEAD} Try another card.\n"
    drafts = split_sections("Payments", content, window_tokens=200, count_tokens=one_token_per_word)
    for draft in drafts:
        assert content[draft.start:draft.end] == draft.text
    assert [(d.ordinal, d.kind) for d in drafts] == [(0, "text"), (1, "text"), (2, "heading")]


def test_each_headed_section_also_embeds_its_heading_alone_pointing_at_its_first_window():
    content = f"{LEAD}\n## Long\n{words(500)}\n## Short\n{LEAD}"
    headings = split(content, window=128, kind="heading")
    texts = split(content, window=128)
    assert [h.heading_path for h in headings] == [("Long",), ("Short",)]  # the lead has no heading
    first_long = next(d for d in texts if d.heading_path == ("Long",))
    assert (headings[0].text, headings[0].start) == (first_long.text, first_long.start)
    assert section_embedding_text("Payments", headings[0].heading_path, headings[0].text, "heading") == \
        "Payments › Long"
    ordinals = [d.ordinal for d in split_sections("Payments", content, window_tokens=128,
                                                  count_tokens=one_token_per_word)]
    assert ordinals == list(range(len(ordinals)))


def test_a_long_section_becomes_overlapping_windows_that_cover_every_word_and_fit_the_window():
    body = words(1000)
    window = 128
    drafts = split(f"## Long\n{body}", window=window)
    assert len(drafts) > 1
    covered = set()
    for draft in drafts:
        text = section_embedding_text("Payments", draft.heading_path, draft.text)
        assert len(text.split()) <= window
        covered |= set(draft.text.split())
        assert draft.heading_path == ("Long",)
    assert covered == set(body.split())  # nothing cut
    for previous, following in zip(drafts, drafts[1:]):
        assert following.start < previous.end  # overlapping
        assert following.start > previous.start


def test_a_section_that_fits_is_one_window():
    drafts = split(f"## Short\n{words(150)}", window=200)
    assert len(drafts) == 1


def test_every_word_of_a_long_article_is_in_some_section():
    content = f"{words(300, 'lead')}\n## A\n{words(500, 'a')}\n### B\n{words(20, 'b')}\n## C\n{words(700, 'c')}"
    drafts = split(content, window=100)
    seen = {word for draft in drafts for word in draft.text.split()}
    assert seen == {w for w in content.split() if not w.startswith("#") and w not in ("A", "B", "C")}


def test_the_card_is_the_title_and_lead_and_equals_the_first_section_text():
    drafts = split(f"{LEAD}\n## Refunds\n{LEAD}")
    assert card_embedding_text("Payments", drafts) == f"Payments\n\n{LEAD}"
    assert card_embedding_text("Payments", drafts) == section_embedding_text("Payments", (), drafts[0].text)


def test_without_a_lead_the_card_is_the_title():
    assert card_embedding_text("Payments", split(f"## Refunds\n{LEAD}")) == "Payments"


def test_section_text_carries_the_title_and_heading_path():
    assert section_embedding_text("Reset your password", ("Help", "Didn't get the email?"), " Check spam. ") == \
        "Reset your password\nHelp › Didn't get the email?\n\nCheck spam."


def test_real_minilm_windows_fit_its_256_word_piece_window(real_local_embedder):
    text = " ".join(["Unbelievably", "complicated", "authentication-workflow", "reconfiguration"] * 300)
    drafts = split_sections("A title", f"## Long\n{text}", window_tokens=real_local_embedder.input_window_tokens,
                            count_tokens=real_local_embedder.count_tokens)
    assert real_local_embedder.input_window_tokens == 254  # 256 less [CLS] and [SEP]
    assert len(drafts) > 2
    for draft in drafts:
        embedded = section_embedding_text("A title", draft.heading_path, draft.text)
        assert sum(real_local_embedder.count_tokens([embedded])) <= 256 - 2
