"""Admin dashboard: how many questions the help center deflected, per day and per category, as numbers and a chart."""

from __future__ import annotations

from flask import Blueprint, render_template, request, url_for

from service.tickets.agent_metrics import REPLACED_AT, drafts_report
from service.tickets.deflection import deflection_report
from service.web.admin.charts import outcome_chart
from service.web.admin.pages import nav_context
from service.web.requests import db, parse_whole_number

admin_dashboard = Blueprint("admin_dashboard", __name__, url_prefix="/admin")
admin_dashboard.context_processor(nav_context)
PERIODS = (7, 14, 30, 90)


@admin_dashboard.get("/dashboard", endpoint="dashboard")
def dashboard():
    """Questions asked, answered by the AI, solved, escalated and handed off; deflection; cited articles."""
    days = parse_whole_number(request.args.get("days"))
    days = days if days in PERIODS else 14
    report = deflection_report(db(), days=days)
    return render_template("admin/dashboard.html", report=report, chart=outcome_chart(report.by_day),
                           drafts=drafts_report(db(), days=days), replaced_at=REPLACED_AT,
                           periods=PERIODS, gaps_url=url_for("tickets_api.reports_gaps", days=days))
