"""Issue 36 leftovers: an erased ticket ("(erased)") leaves the agents' queue, closed by the system, and is never
quoted again: not as an "also asked" question, not as a proposal's evidence question, not as a gaps example."""

from __future__ import annotations

import dataclasses

import sqlalchemy as sa

from service.db.models import Article, Ticket, TicketTransition
from service.knowledge.candidates import propose_candidate
from service.knowledge.importance import outcome_counts
from service.tickets.queries import content_gaps

from .test_learning import RECORD_OUTCOME

ERASED = "(erased)"
ANN = "ann.erased@example.com"
BEA = "bea.kept@example.com"
OFF_TOPIC = "Can I bring my parrot to the warehouse on Sunday?"


def _ask(client, subject: str, email: str) -> int:
    response = client.post("/api/tickets", json={"subject": subject, "body": subject, "email": email})
    assert response.status_code == 201, response.get_json()
    return response.get_json()["ticket"]["id"]


def _erase(client, email: str) -> dict:
    response = client.post("/api/customers/erase", json={"email": email, "confirm": email})
    assert response.status_code == 200, response.get_json()
    return response.get_json()["counts"]


def _queue(client, queue: str) -> set[int]:
    response = client.get(f"/api/tickets?queue={queue}")
    assert response.status_code == 200, response.get_json()
    return {item["id"] for item in response.get_json()["tickets"]}


def test_erasing_a_customer_closes_their_open_ticket_as_the_system_and_it_leaves_the_queue(seeded, client, session):
    ann, bea = _ask(client, OFF_TOPIC, ANN), _ask(client, OFF_TOPIC, BEA)
    assert {ann, bea} <= _queue(client, "open")  # handed off with an address: a person takes them
    dry = client.post("/api/customers/erase", json={"email": ANN, "confirm": ANN, "dry_run": True}).get_json()
    assert dry["counts"]["closed_tickets"] == 1 and ann in _queue(client, "open")  # a dry run closes nothing
    assert _erase(client, ANN)["closed_tickets"] == 1
    open_now = _queue(client, "open")
    assert ann not in open_now and bea in open_now
    last = session.scalars(sa.select(TicketTransition).where(TicketTransition.ticket_id == ann)
                           .order_by(TicketTransition.id.desc()).limit(1)).one()
    assert (last.from_state, last.to_state, last.event, last.actor) == ("open", "solved", "erased", "system")
    ticket = session.get(Ticket, ann)
    assert (ticket.state, ticket.subject, ticket.solved_by) == ("solved", ERASED, "system")
    assert session.get(Ticket, bea).state == "open"


def test_an_erased_ticket_is_no_ones_also_asked_question(seeded, client, runtime):
    # Every handed-off question "also asked", whatever its similarity: only erasure can keep one out.
    runtime.settings = dataclasses.replace(runtime.settings, candidate_also_asked_threshold=-1.0)
    erased, kept = _ask(client, OFF_TOPIC, ANN), _ask(client, OFF_TOPIC, BEA)
    asked = _ask(client, "Can I bring my dog to the warehouse?", "cy@example.com")
    _erase(client, ANN)
    with runtime.session() as session:
        candidate = propose_candidate(session, embedder=runtime.embedder, settings=runtime.settings,
                                      ticket_id=asked, question="Can I bring my dog to the warehouse?",
                                      reply_bodies=["Yes, dogs on a lead are welcome."])
    also = {item["ticket_id"]: item["question"] for item in candidate.also_asked}
    assert kept in also and erased not in also and ERASED not in also.values()


def test_an_erased_tickets_outcome_counts_but_its_question_is_no_proposals_evidence(seeded, client, runtime):
    with runtime.session() as session:
        article = session.scalar(sa.select(Article.id).where(Article.title == "Reset your password"))
        for n in range(6):
            session.execute(RECORD_OUTCOME, {"question": f"reset question {n}", "solved": True, "article": article})
        session.execute(sa.update(Ticket).where(Ticket.subject.in_(["reset question 4", "reset question 5"]))
                        .values(customer_email=ANN))  # the two newest are Ann's
    _erase(client, ANN)
    with runtime.session() as session:
        counts, questions = outcome_counts(session, 30)
    assert counts[article].solved == 6  # aggregates stay
    shown = [q["question"] for q in questions[article]]
    assert shown == [f"reset question {n}" for n in (3, 2, 1, 0)]


def test_an_erased_ticket_counts_in_the_gaps_report_but_is_never_its_example(seeded, client, session):
    _ask(client, OFF_TOPIC, ANN)
    kept_subject = "Can I bring my parrot to the warehouse on Saturday?"
    _ask(client, kept_subject, BEA)
    before = {group["label"]: group["tickets"] for group in content_gaps(session)}
    _erase(client, ANN)
    groups = content_gaps(session)
    assert {group["label"]: group["tickets"] for group in groups} == before  # aggregates stay
    examples = [example for group in groups for example in group["examples"]]
    assert kept_subject in examples and ERASED not in examples
