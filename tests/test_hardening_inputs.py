"""Issue 16, items 3, 4, 5, 7, 10 and 11: the inputs that still broke the service, and the smaller defects."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings, strategies as st

from service.config import Settings
from service.db.engine import create_engine
from service.knowledge.articles import add_article, update_article
from service.retrieval.approximate import build_approximate_index
from service.knowledge.importer import import_path
from service.retrieval.lexical import MAX_QUERY_TERMS, add_synonym_group, capped_terms
from service.runtime import Runtime
from service.tickets.validation import is_email
from service.validation import QUERY_MAX
from service.web.app import create_app
from service.web.errors import database_error_cause

from .helpers import FailingEmbedder, assert_error
from .test_serve import free_port

TICKET = {"subject": "Refund", "body": "How do I get a refund for my order?"}


def long_query(words: int = 2000) -> str:
    """A long, varied question under QUERY_MAX characters: ``words`` words from a fixed vocabulary, numbered so
    most are distinct, and every tenth a plain word that has synonyms."""
    vocabulary = ("refund password reset order invoice account login email shipping delivery card payment "
                  "billing subscription cancel upgrade support ticket help export data privacy security").split()
    rng = random.Random(16)
    text = " ".join(rng.choice(("refund", "password")) if i % 10 == 0 else rng.choice(vocabulary) + str(i % 50)
                    for i in range(words))
    assert len(text) <= QUERY_MAX
    return text


SYNONYMS = [["refund", "money back", "reimbursement", "repayment", "chargeback", "return"],
            ["password", "passcode", "passphrase", "pin", "credentials", "login code", "secret"]]


# ---------------------------------------------------------------- item 3: importance 5e-324


def test_item_3_a_subnormal_importance_is_stored_rounded_and_search_keeps_working(seeded, client):
    article_id = client.get("/api/articles").get_json()["articles"][0]["id"]
    patched = client.patch(f"/api/articles/{article_id}", json={"importance": 5e-324})
    assert patched.status_code == 200 and patched.get_json()["article"]["importance"] == 0.0
    assert client.patch(f"/api/articles/{article_id}", json={"importance": 1.23456}).get_json()[
        "article"]["importance"] == 1.235
    assert client.post("/api/search", json={"query": "refund"}).status_code == 200
    created = client.post("/api/tickets", json=TICKET).get_json()["ticket"]
    assert created["status"] == "answered"


def test_item_3_the_database_refuses_a_tiny_importance_even_past_the_application(session):
    with pytest.raises(sa.exc.IntegrityError, match="knowledge_base_importance_not_tiny"):
        with session.begin_nested():
            session.execute(sa.text("INSERT INTO knowledge_base (title, content, importance) "
                                    "VALUES ('t', 'c', 5e-324)"))


@pytest.mark.parametrize("name", ["SEARCH_RECENCY_WEIGHT", "SEARCH_SIMILARITY_WEIGHT"])
def test_item_3_a_weight_small_enough_to_underflow_is_refused_at_start(name):
    from service.config import ConfigError

    with pytest.raises(ConfigError, match=name):
        Settings.from_env({name: "1e-320"})


# ---------------------------------------------------------------- item 4: internal error text


def test_item_4_the_public_ticket_shape_carries_no_internals_and_admins_see_them(seeded, anonymous_client, client):
    public = anonymous_client.post("/api/tickets", json=TICKET).get_json()["ticket"]
    assert not {"error", "reason", "model", "timings", "tokens", "gate"} & set(public)
    assert public["answer"] and public["citations"]
    assert not {"similarity", "score", "recency", "importance"} & set(public["citations"][0])
    admin = client.post("/api/tickets", json=TICKET).get_json()["ticket"]
    assert {"error", "reason", "model", "timings", "tokens", "gate"} <= set(admin)
    assert "score" in admin["citations"][0]


# ---------------------------------------------------------------- item 5: long lexical/hybrid queries


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_item_5_a_2000_word_query_is_answered_not_a_false_database_outage(seeded, client, mode):
    seeded.__dict__["retrieval"] = replace(seeded.retrieval, mode=mode)
    with seeded.session() as session:  # synonyms multiply the variants the tsquery is built from
        for group in SYNONYMS:
            add_synonym_group(session, group)
    response = client.post("/api/search", json={"query": long_query()})
    assert response.status_code == 200, response.get_data(as_text=True)
    ticket = client.post("/api/tickets", json={"subject": "Many questions", "body": long_query()})
    assert ticket.get_json()["ticket"]["status"] != "failed"


def test_item_5_query_terms_are_deduplicated_and_capped():
    query = long_query()
    capped = capped_terms(query).split()
    assert len(capped) == MAX_QUERY_TERMS and len({word.lower() for word in capped}) == MAX_QUERY_TERMS
    assert capped_terms("refund my order") == "refund my order"


DEEP_TSQUERY = "SELECT to_tsvector('a') @@ (" + " & ".join(["'a'"] * 40000) + ")::tsquery"


def test_item_5_database_errors_are_mapped_by_cause(engine):
    with engine.connect() as conn:
        with pytest.raises(sa.exc.OperationalError) as timeout:
            conn.execute(sa.text("SET statement_timeout = 50; SELECT pg_sleep(2)"))
        conn.rollback()
        with pytest.raises(sa.exc.OperationalError) as too_complex:
            conn.execute(sa.text("SET max_stack_depth = '100kB'"))
            conn.execute(sa.text(DEEP_TSQUERY))
        conn.rollback()
    down = create_engine(f"postgresql+psycopg://nobody@127.0.0.1:{free_port()}/none", pool_size=1)
    with pytest.raises(sa.exc.OperationalError) as outage:
        down.connect()
    down.dispose()
    causes = [database_error_cause(error.value) for error in (timeout, too_complex, outage)]
    assert causes == ["timeout", "too_complex", "outage"]


def test_item_5_a_statement_too_complex_answers_400_not_database_unavailable(app, client):
    @app.get("/api/test-too-complex")
    def _too_complex():
        from service.web.requests import db

        db().execute(sa.text("SET LOCAL max_stack_depth = '100kB'"))
        db().execute(sa.text(DEEP_TSQUERY))

    assert_error(client.get("/api/test-too-complex"), 400, "query_too_complex")


# ---------------------------------------------------------------- item 7: numbers in admin query strings

ADMIN_NUMBER_PARAMETERS = [("/admin/articles", "page"), ("/admin/tickets", "page"), ("/admin/tickets", "article_id"),
                           ("/admin/dashboard", "days")]


@pytest.mark.parametrize("path, name", ADMIN_NUMBER_PARAMETERS)
@pytest.mark.parametrize("value", ["²", "١٢", "৩", " 7", "1_0", "+3", "-1", "9" * 40, "", "1e3", "0x10"])
def test_item_7_odd_numbers_in_admin_query_strings_fall_back_not_500(admin_client, path, name, value):
    assert admin_client.get(path, query_string={name: value}).status_code == 200


@pytest.mark.parametrize("path, name", [("/api/articles", "page"), ("/api/tickets", "per_page"),
                                        ("/api/reports/gaps", "days")])
def test_item_7_odd_numbers_in_api_query_strings_are_a_400(client, path, name):
    assert_error(client.get(path, query_string={name: "²"}), 400, "validation_error")


@settings(max_examples=40, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=12),
       target=st.sampled_from(ADMIN_NUMBER_PARAMETERS))
def test_item_7_fuzzed_admin_query_strings_never_answer_500(admin_client, value, target):
    path, name = target
    assert admin_client.get(path, query_string={name: value}).status_code == 200


# ---------------------------------------------------------------- item 10: the rest


def test_item_10_healthz_names_no_socket_or_driver_error_to_anonymous_callers(settings, local_embedder):
    port = free_port()
    down = create_engine(f"postgresql+psycopg://nobody@127.0.0.1:{port}/none", pool_size=1)
    try:
        app = create_app({"TESTING": True}, runtime=Runtime(replace(settings, secret_key="k" * 32), down,
                                                             local_embedder))
        response = app.test_client().get("/healthz")
        error = assert_error(response, 503, "database_unavailable")
        assert error["details"] == {} and str(port) not in response.get_data(as_text=True)
        assert response.headers["Retry-After"]
    finally:
        down.dispose()


def test_item_10_stats_show_index_ddl_only_to_admins(seeded, anonymous_client, client, runtime):
    with runtime.session() as session:  # the approximate mode's index, the one index stats describe
        build_approximate_index(session, runtime.embedder.model_name)
    assert anonymous_client.get("/api/stats").get_json()["index"] is None
    assert "hnsw" in client.get("/api/stats").get_json()["index"]["definition"]


def test_item_10_import_does_not_follow_a_symlink_out_of_the_folder(session, local_embedder, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Root password\n\nhunter2 is the root password.\n")
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "refunds.md").write_text("# Refunds\n\nRefunds take five days.\n")
    (folder / "linked.md").symlink_to(outside / "secret.md")
    report = import_path(session, local_embedder, folder)
    assert report.added == 1
    assert [failure.reason for failure in report.failed] == ["a link to a file outside the folder; not imported"]
    assert session.scalar(sa.text("SELECT count(*) FROM knowledge_base WHERE content LIKE '%hunter2%'")) == 0


@pytest.mark.parametrize("address", ["a@b.co<script>", "a\u200b@b.co", "a@b..co", "a@b", "a@.co", ".a@b.co",
                                     "a..b@b.co", "a@b.co>", "a b@c.co", "a@-b.co", "a@b.c"])
def test_item_10_the_email_check_refuses_markup_invisible_characters_and_empty_labels(address, anonymous_client):
    assert not is_email(address)
    assert_error(anonymous_client.post("/api/tickets", json={**TICKET, "email": address}), 400, "validation_error")


@pytest.mark.parametrize("address", ["ana@example.com", "first.last+tag@mail.example.org", "x@xn--p1ai.xn--p1ai"])
def test_item_10_ordinary_addresses_still_pass(address):
    assert is_email(address)


# ---------------------------------------------------------------- item 11: update_article's status


def test_item_11_update_article_reports_pending_when_a_section_failed_to_embed(session, local_embedder):
    content = "Refunds take five days.\n\n## Cards\n\nCard refunds go back to the card.\n"
    article = add_article(session, local_embedder, {"title": "Refunds", "content": content})
    assert article.embedding_status == "embedded"
    changed = content.replace("go back to the card", "go back to the card within a week")
    updated = update_article(session, FailingEmbedder(), article.id, {"content": changed})
    assert updated.embedding_error and updated.embedding_status == "pending"

