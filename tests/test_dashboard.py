"""The deflection dashboard: its counts from real tickets, the SVG chart's geometry, admin-only access."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from service.tickets.deflection import Outcomes, deflection_report
from service.tickets.helpdesk import escalate, mark_solved, ticket_fields
from service.tickets.queries import content_gaps
from service.tickets.secrets import new_ticket_secret
from service.tickets.workflow import answer_ticket
from service.web.admin.charts import nice_maximum, outcome_chart

PASSWORD_QUESTION = "I forgot my password and the reset email never arrived"
REFUND_QUESTION = "How do I get a refund for an order I returned?"
OFF_TOPIC = "What is the capital of France?"


def submit(runtime, description: str) -> tuple[int, str]:
    """A help-page question, answered offline; (ticket id, secret)."""
    secret, digest = new_ticket_secret()
    return answer_ticket(runtime, None, ticket_fields(description), secret_sha256=digest), secret


@pytest.fixture
def outcomes(seeded):
    """Four questions: one solved, one escalated after an answer, one handed off and escalated, one handed off."""
    solved, solved_key = submit(seeded, PASSWORD_QUESTION)
    unhappy, unhappy_key = submit(seeded, REFUND_QUESTION)
    handed, handed_key = submit(seeded, OFF_TOPIC)
    submit(seeded, "Who painted the Mona Lisa?")
    with seeded.session() as session:
        mark_solved(session, solved, solved_key)
        escalate(session, unhappy, unhappy_key, email="a@example.com")
        escalate(session, handed, handed_key, email="b@example.com")
    return seeded


def test_report_counts_each_outcome_and_the_deflection_rate(outcomes):
    with outcomes.session() as session:
        report = deflection_report(session, days=7)
    assert report.total == Outcomes(asked=4, answered=2, solved=1, escalated=2, handed_off=2, handed_off_waiting=1)
    assert report.total.deflection_rate == 0.25
    assert sum(o.asked for _, o in report.by_day) == 4 and len(report.by_day) == 7
    assert report.by_day[-1][0] - report.by_day[0][0] == timedelta(days=6)
    categories = dict(report.by_category)
    assert categories["Account"].solved == 1 and categories["Returns"].escalated == 1
    assert sum(o.asked for o in categories.values()) == 4


def test_report_lists_articles_cited_in_solved_and_escalated_answers(outcomes):
    with outcomes.session() as session:
        articles = {a.title: (a.solved, a.escalated) for a in deflection_report(session).articles}
    assert articles["Reset your password"] == (1, 0)
    assert articles["How to request a refund"] == (0, 1)


def test_an_answer_the_customer_escalated_shows_up_in_the_gaps_report(outcomes):
    with outcomes.session() as session:
        groups = {(g["nearest_article"] or {}).get("title"): g for g in content_gaps(session)}
    assert groups["How to request a refund"]["not_helpful"] == 1
    assert "Reset your password" not in groups  # solved: not a gap


def test_a_period_without_questions_is_all_zeros(seeded):
    with seeded.session() as session:
        report = deflection_report(session, days=7)
    assert report.total == Outcomes() and report.total.deflection_rate is None and report.articles == []


@pytest.mark.parametrize("value, top", [(0, 1), (3, 3), (5, 5), (6, 10), (10, 10), (11, 20), (21, 50), (51, 100)])
def test_nice_maximum_rounds_the_axis_up(value, top):
    assert nice_maximum(value) == top


def test_chart_stacks_each_day_up_to_the_questions_asked():
    days = [(date(2026, 12, 1), Outcomes(asked=4, answered=3, solved=2, escalated=1, handed_off=1,
                                         handed_off_waiting=1)),
            (date(2026, 12, 2), Outcomes())]
    chart = outcome_chart(days)
    first = [bar for bar in chart.bars if bar.label.startswith("2026-12-01")]
    assert [bar.series for bar in first] == ["solved", "escalated", "handed_off_waiting"]
    assert sum(bar.height for bar in first) == pytest.approx(chart.plot_bottom - chart.y_ticks[-1].position)
    assert [tick.text for tick in chart.y_ticks] == ["0", "1", "2", "3", "4"]
    assert [tick.text for tick in chart.x_ticks] == ["Dec 01", "Dec 02"]


def test_dashboard_is_admin_only(anonymous_client):
    response = anonymous_client.get("/admin/dashboard")
    assert response.status_code == 302 and "/admin/login" in response.headers["Location"]


def test_dashboard_shows_the_counts_the_chart_and_the_gaps_link(admin_client, outcomes):
    html = admin_client.get("/admin/dashboard?days=7").get_data(as_text=True)
    assert '<span class="value" id="total-asked">4</span>' in html
    assert '<span class="value" id="deflection-rate">25%</span>' in html
    assert "<svg" in html and 'class="bar-solved"' in html
    assert "/api/reports/gaps?days=7" in html and "Reset your password" in html
    assert 'aria-current="page">Self-service</a>' in html
