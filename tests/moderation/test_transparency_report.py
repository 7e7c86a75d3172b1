"""The DSA transparency report (moderation/transparency/report.py): the report for a
period matches counts taken straight from the tables (tests/helpers_transparency.py), in a fixed
number of aggregate queries; the command prints it as JSON or CSV; the admin page shows it to
those who may view statements of reasons."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import date, timedelta

import pytest
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from hypothesis import given, settings as hypothesis_settings, strategies as st

from moderation import services
from moderation.models import (
    AccountAction,
    AccountAppeal,
    Appeal,
    QueueVisit,
    Decision,
    Report,
    TransparencyStatement,
    default_dsa_mapping,
)
from moderation.transparency.report import (
    period_bounds,
    report_csv,
    report_rows,
    transparency_report,
)
from tests.helpers import examples, decided, staff_browser
from tests.helpers_transparency import assert_same_figures, transparency_counts_from_tables
from tests.moderation.test_authors import author, authored
from tests.moderation.test_reports_and_appeals import appeal, report

pytestmark = pytest.mark.django_db

PAGE = "/admin/moderation/decision/transparency-report/"
# The report's queries: notices by kind, by reason; statements made, overturned; content and
# account appeals; account actions; time to decision by notice kind and by queue.
REPORT_QUERIES = 9


@pytest.fixture
def moderators(django_user_model):
    users = django_user_model.objects
    return (users.create_user("mod-a", is_staff=True), users.create_user("mod-b", is_staff=True))


def this_week() -> tuple[date, date]:
    today = timezone.now().date()
    return today - timedelta(days=7), today


def moved_back(days: int) -> None:
    """Every report, appeal, account action and statement so far happened `days` earlier (the
    decisions stay: an appeal filed now is in its window)."""
    shift = timedelta(days=days)
    for model in (Report, Appeal, AccountAppeal):
        model.objects.update(created_at=F("created_at") - shift)
        model.objects.filter(resolved_at__isnull=False).update(resolved_at=F("resolved_at") - shift)
    AccountAction.objects.update(created_at=F("created_at") - shift)
    TransparencyStatement.objects.update(created_at=F("created_at") - shift)
    TransparencyStatement.objects.filter(overturned_at__isnull=False).update(overturned_at=F("overturned_at") - shift)


def override(review, label: str, moderator, category: str = "harassment"):
    return services.review_override(review_id=review.pk, label=label, reason="judged", moderator=moderator,
                                    **({"category": category} if label == "rejected" else {}))


def noticed(http, api_client, kind: str, reason: str, reporters: int = 1):
    review = decided(api_client, "approved")
    for number in range(reporters):
        assert report(http, review, reporter=f"{kind}-{reason}-{number}", reason=reason, kind=kind).status_code == 201
    review.refresh_from_db()
    return review


def mixed_period(http, api_client, moderators) -> tuple[date, date]:
    """Rejections by the provider and by a moderator on a flag, notices of each kind actioned and
    not, content appeals upheld, overturned and open, the ladder's suspension and ban, a moderator's
    suspension overturned on appeal, and rows before the period and on its edges. Returns the
    period: the last seven days and today."""
    mod_a, mod_b = moderators
    # Before the period: a rejection (overturned in the period, its correction counted then), an
    # appealed one (upheld in the period), an open user report, a moderator's suspension.
    old_rejection, old_appealed = decided(api_client, "rejected"), decided(api_client, "rejected")
    assert appeal(http, old_appealed).status_code == 201  # decided in the period, received before it
    noticed(http, api_client, "user", "spam")
    authored(api_client, "person-old", "approved")
    services.author_act(author_pk=author(api_client, "person-old").pk, moderator=mod_a, action="suspend", days=7,
                        reason="r")
    moved_back(40)

    assert appeal(http, old_rejection).status_code == 201
    override(old_rejection, "approved", mod_b)
    override(old_appealed, "rejected", mod_b)
    assert appeal(http, decided(api_client, "rejected")).status_code == 201  # received, still open
    for _ in range(2):
        decided(api_client, "rejected")
    upheld, overturned = decided(api_client, "rejected"), decided(api_client, "rejected")
    for review, label in ((upheld, "rejected"), (overturned, "approved")):
        assert appeal(http, review).status_code == 201
        override(review, label, mod_a)
    override(decided(api_client, "manual_review"), "rejected", mod_a, category="hate")  # on the model's flag
    override(noticed(http, api_client, "dsa_notice", "hate"), "rejected", mod_b, category="hate")
    override(noticed(http, api_client, "trusted_flagger", "spam"), "approved", mod_b)
    override(noticed(http, api_client, "user", "harassment", reporters=3), "rejected", mod_a)  # the threshold
    expiring = noticed(http, api_client, "user", "other")
    services.reports_expire_due(now=timezone.now() + timedelta(days=services.policy_active().report_expiry_days + 1))
    noticed(http, api_client, "user", "spam")
    on_the_end = noticed(http, api_client, "user", "spam")

    for _ in range(8):  # the default ladder: a suspension at 5 points, a ban at 8
        authored(api_client, "person-ladder", "rejected")
    ban_appeal = services.account_appeal_file(client=api_client, author_id="person-ladder", statement="please")
    services.account_appeal_resolve(appeal_id=ban_appeal.pk, moderator=mod_a, outcome="upheld", reason="stands")
    authored(api_client, "person-mod", "approved")
    services.author_act(author_pk=author(api_client, "person-mod").pk, moderator=mod_a, action="suspend", days=3,
                        reason="r")
    lifted = services.account_appeal_file(client=api_client, author_id="person-mod", statement="please")
    services.account_appeal_resolve(appeal_id=lifted.pk, moderator=mod_b, outcome="overturned", reason="ok")

    start, end = this_week()
    since, until = period_bounds(start, end)
    Report.objects.filter(review=expiring).update(created_at=since)  # the first instant: in
    Report.objects.filter(review=on_the_end).update(created_at=until)  # the day after: out
    return start, end


def test_the_report_for_the_period_matches_counts_taken_straight_from_the_tables(http, api_client, moderators):
    start, end = mixed_period(http, api_client, moderators)

    report = transparency_report(start=start, end=end)

    expected = transparency_counts_from_tables(start=start, end=end)
    assert_same_figures(report, expected)
    # And the data set is the one described: every kind of row is there to be counted.
    notices = expected["notices"]["by_kind"]
    assert {kind: (n["received"], n["actioned"], n["no_action"], n["expired"], n["open"])
            for kind, n in notices.items()} == {"user": (5, 3, 0, 1, 1), "dsa_notice": (1, 1, 0, 0, 0),
                                                "trusted_flagger": (1, 0, 1, 0, 0)}
    assert all(notices[kind]["median_seconds_to_action"] > 0 for kind in ("user", "dsa_notice"))
    assert expected["actions"]["by_type"] == {"content_visibility": 16, "account_suspension": 2,
                                              "account_termination": 1}
    assert expected["actions"]["by_source_type"] == {"SOURCE_VOLUNTARY": 17, "SOURCE_ARTICLE_16": 2,
                                                     "SOURCE_TRUSTED_FLAGGER": 0}
    assert expected["actions"]["by_automated_decision"] == {"AUTOMATED_DECISION_FULLY": 15,
                                                            "AUTOMATED_DECISION_PARTIALLY": 1,
                                                            "AUTOMATED_DECISION_NOT_AUTOMATED": 3}
    assert expected["automation"]["total"] == {"automated": 16, "overturned": 1, "overturned_share": 1 / 16}
    assert expected["corrections"]["by_type"] == {"content_visibility": 2, "account_suspension": 1,
                                                  "account_termination": 0}
    assert {name: (a["received"], a["decided"], a["upheld"], a["overturned"])
            for name, a in expected["appeals"].items()} == {"content": (4, 4, 2, 2), "account": (2, 2, 1, 1)}
    assert expected["accounts"] == {"suspensions": {"total": 2, "strikes": 1, "moderator": 1},
                                    "terminations": {"total": 1, "strikes": 1, "moderator": 0}}


def test_the_report_takes_the_same_few_queries_whatever_the_data(http, api_client, moderators,
                                                                 django_assert_num_queries):
    start, end = this_week()
    with django_assert_num_queries(REPORT_QUERIES):
        transparency_report(start=start, end=end)
    mixed_period(http, api_client, moderators)
    with django_assert_num_queries(REPORT_QUERIES):
        transparency_report(start=start, end=end)


def test_an_empty_period_reports_zeros_and_no_medians(api_client):
    start, end = this_week()

    report = transparency_report(start=start, end=end)

    assert_same_figures(report, transparency_counts_from_tables(start=start, end=end))
    assert report["notices"]["by_kind"]["user"] == {"received": 0, "actioned": 0, "no_action": 0, "expired": 0,
                                                    "open": 0, "median_seconds_to_action": None}
    assert report["appeals"]["content"]["median_seconds_to_decide"] is None
    assert report["automation"] == {"total": {"automated": 0, "overturned": 0, "overturned_share": None},
                                    "by_category": {}}


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_the_report_reads_one_read_only_snapshot(api_client):
    decided(api_client, "rejected")
    start, end = this_week()

    with CaptureQueriesContext(connection) as queries:
        report = transparency_report(start=start, end=end)

    statements = [q["sql"] for q in queries if q["sql"] not in ("BEGIN", "COMMIT")]  # the atomic block's own
    assert statements[0] == "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
    assert len(statements) == REPORT_QUERIES + 1 and not connection.in_atomic_block
    assert report["actions"]["total"] == 1


def test_the_period_is_its_days_in_utc_the_last_one_included():
    since, until = period_bounds(date(2026, 2, 1), date(2026, 2, 28))
    assert (since.isoformat(), until.isoformat()) == ("2026-02-01T00:00:00+00:00", "2026-03-01T00:00:00+00:00")
    with pytest.raises(ValueError):
        period_bounds(date(2026, 2, 2), date(2026, 2, 1))


MANY = 3000
# Each table the report reads, and the indexes its query must be planned on.
INDEXES = {
    "moderation_report": ["report_created_idx"],
    "moderation_transparencystatement": ["statement_created_idx", "statement_overturned_idx"],
    "moderation_appeal": ["appeal_created_idx", "appeal_resolved_idx"],
    "moderation_accountappeal": ["account_appeal_created_idx", "account_appeal_resolved_idx"],
    "moderation_accountaction": ["account_action_created_idx"],
    "moderation_queuevisit": ["queue_visit_decided_idx"],
}


def spread_over_a_year(table: str) -> None:
    """The table's rows one every three hours back from now, resolved (and overturned) an hour
    later, a week's worth in the period; then ANALYZE, so the planner knows."""
    later = {"moderation_report": ", resolved_at = s.at + interval '1 hour'",
             "moderation_appeal": ", resolved_at = s.at + interval '1 hour'",
             "moderation_accountappeal": ", resolved_at = s.at + interval '1 hour'",
             "moderation_transparencystatement": ", overturned_at = s.at + interval '1 hour'"}.get(table, "")
    moments = ("left_at = s.at, anchor_at = s.at - interval '1 hour', due_at = s.at + interval '23 hours'"
               if table == "moderation_queuevisit" else f"created_at = s.at {later}")
    with connection.cursor() as cursor:
        cursor.execute(f"""
            UPDATE {table} t SET {moments}
            FROM (SELECT id, now() - make_interval(hours => (3 * row_number() OVER (ORDER BY id))::int) AS at
                  FROM {table}) s
            WHERE t.id = s.id""")  # noqa: S608 - the test's own table names
        cursor.execute(f"ANALYZE {table}")


def many_rows(api_client) -> None:
    """A few thousand rows in every table the report reads, through the ORM's bulk insert: the
    planner's choice needs them, and thousands through the services would take minutes."""
    review = decided(api_client, "approved")
    authored(api_client, "person-many", "approved")
    who, policy = author(api_client, "person-many"), services.policy_active()
    Report.objects.bulk_create(Report(review=review, reporter_id=f"r{n}", reason="spam", outcome="no_action",
                                      resolved_at=timezone.now(), resolved_by=review.decision) for n in range(MANY))
    decisions = Decision.objects.bulk_create(Decision(review=review, label="rejected", source="system")
                                             for _ in range(2 * MANY))
    Appeal.objects.bulk_create(Appeal(review=review, decision=decisions[n], resolution=decisions[MANY + n],
                                      appellant_id="a", statement="s", status="upheld", resolved_at=timezone.now())
                               for n in range(MANY))
    actions = AccountAction.objects.bulk_create(
        AccountAction(author=who, action="ban", cause="moderator", previous_standing="good") for _ in range(MANY))
    AccountAppeal.objects.bulk_create(AccountAppeal(action=action, author=who, statement="s", status="upheld",
                                                    resolved_at=timezone.now()) for action in actions)
    TransparencyStatement.objects.bulk_create(
        TransparencyStatement(account_action=action, facts={"kind": "account", "action": "ban"}, body={},
                              policy=policy, dsa_category=default_dsa_mapping()["default"]["category"],
                              automated_decision="AUTOMATED_DECISION_NOT_AUTOMATED", source_type="SOURCE_VOLUNTARY")
        for action in actions)
    now = timezone.now()
    QueueVisit.objects.bulk_create(QueueVisit(review=review, queue="notices", cause="notice", anchor_at=now, due_at=now,
                                              left_at=now, decided=True) for _ in range(MANY))
    for table in INDEXES:
        spread_over_a_year(table)


def test_every_query_of_the_report_is_planned_on_its_tables_timestamp_indexes(api_client):
    many_rows(api_client)
    with CaptureQueriesContext(connection) as queries:
        transparency_report(start=this_week()[0], end=this_week()[1])
    plans = {}
    with connection.cursor() as cursor:
        for query in queries:
            cursor.execute("EXPLAIN " + query["sql"])
            table = re.search(r'FROM "(\w+)"', query["sql"])[1]
            plans.setdefault(table, []).append("\n".join(row[0] for row in cursor.fetchall()))

    assert set(plans) == set(INDEXES)
    for table, indexes in INDEXES.items():
        named = set(re.findall(r"\w+_idx", "\n".join(plans[table])))
        assert set(indexes) <= named, (table, plans[table])
        assert "Seq Scan" not in "\n".join(plans[table]), (table, plans[table])


# --- the command ----------------------------------------------------------------------------

def run(*args: str) -> str:
    out = io.StringIO()
    call_command("transparency_report", *args, stdout=out)
    return out.getvalue()


def test_the_command_prints_the_report_as_json_with_sorted_keys(http, api_client, moderators):
    start, end = mixed_period(http, api_client, moderators)

    printed = run("--start", start.isoformat(), "--end", end.isoformat())

    assert json.loads(printed) == json.loads(json.dumps(transparency_report(start=start, end=end)))
    assert printed == json.dumps(json.loads(printed), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_the_command_prints_one_csv_row_per_figure(http, api_client, moderators):
    start, end = mixed_period(http, api_client, moderators)

    rows = list(csv.reader(io.StringIO(run("--start", str(start), "--end", str(end), "--format", "csv"))))

    assert rows[0] == ["section", "key", "value"]
    figures = {(section, key): value for section, key, value in rows[1:]}
    assert len(figures) == len(rows) - 1
    report = transparency_report(start=start, end=end)
    assert figures[("notices", "by_kind.dsa_notice.actioned")] == "1"
    assert figures[("appeals", "account.overturned")] == str(report["appeals"]["account"]["overturned"])
    # A decision with no action is a decision: the time to it counts (docs/design.md, "Deadlines").
    median = report["notices"]["by_kind"]["trusted_flagger"]["median_seconds_to_action"]
    assert median is not None and figures[("notices", "by_kind.trusted_flagger.median_seconds_to_action")] == str(median)
    assert [(s, k) for s, k, _ in report_rows(report)] == [(s, k) for s, k, _ in rows[1:]]


@pytest.mark.parametrize(("args", "message"), [
    (["--start", "2026-13-01", "--end", "2026-12-31"], "--start '2026-13-01' is not a date"),
    (["--start", "20261101", "--end", "2026-11-30"], "--start '20261101' is not a date"),
    (["--start", "2026-11-01", "--end", "soon"], "--end 'soon' is not a date"),
    (["--start", "2026-11-02", "--end", "2026-11-01"], "--end 2026-11-01 is before --start 2026-11-02"),
    (["--start", "2026-11-01", "--end", "9999-12-31"], "--end 9999-12-31 is past the last day a report can count"),
])
def test_the_command_refuses_a_bad_date_or_an_end_before_the_start(args, message):
    with pytest.raises(CommandError, match=message):
        run(*args)


def test_the_command_refuses_an_unknown_format():
    with pytest.raises(CommandError, match="format"):
        run("--start", "2026-11-01", "--end", "2026-11-30", "--format", "xml")


FIGURE = st.one_of(st.integers(), st.floats(allow_nan=False), st.none(), st.text())


@hypothesis_settings(max_examples=examples(60), deadline=None)
@given(st.dictionaries(st.text(), st.dictionaries(st.text(), FIGURE, max_size=4), max_size=4))
def test_any_unicode_figure_name_survives_the_csv(figures):
    """Figure names come from categories and reasons: whatever their characters (commas,
    quotes, line breaks, bidi marks), a CSV reader reads back the rows written."""
    rows = list(csv.reader(io.StringIO(report_csv(figures), newline="")))
    assert rows[0] == ["section", "key", "value"]
    assert rows[1:] == [[s, k, "" if v is None else str(v)] for s, k, v in report_rows(figures)]


# --- the admin page -------------------------------------------------------------------------

def test_the_page_shows_the_periods_figures_under_the_workplace_csp(http, api_client, moderators,
                                                                    django_user_model):
    start, end = mixed_period(http, api_client, moderators)
    browser = staff_browser(django_user_model, "audra", "auditor")

    response = browser.get(PAGE, {"start": start.isoformat(), "end": end.isoformat()})

    assert response.status_code == 200
    assert "script-src 'self' 'nonce-" in response["Content-Security-Policy"]
    page = response.content.decode()
    report = transparency_report(start=start, end=end)
    for section, key, _ in report_rows(report):
        assert f'id="section-{section}"' in page and f"<td>{key}</td>" in page
    assert '<td>by_kind.user.actioned</td><td class="figure">3</td>' in page


def test_the_page_opens_on_the_current_month_and_renders_with_no_data(django_user_model):
    browser = staff_browser(django_user_model, "audra", "auditor")

    response = browser.get(PAGE)

    assert response.status_code == 200
    today = timezone.now().date()
    first_of_month = today.replace(day=1)
    assert response.context["form"].initial == {"start": first_of_month, "end": today}
    assert response.context["report"]["period"]["end"] == today.isoformat()
    assert '<td>total.received</td><td class="figure">0</td>' in response.content.decode()
    last = first_of_month - timedelta(days=1)
    assert f'href="?start={last.replace(day=1).isoformat()}&amp;end={last.isoformat()}"' in response.content.decode()


def test_a_period_ending_before_it_starts_is_a_form_error_and_shows_no_figures(django_user_model):
    browser = staff_browser(django_user_model, "audra", "auditor")

    response = browser.get(PAGE, {"start": "2026-11-02", "end": "2026-11-01"})

    assert response.status_code == 200 and response.context["report"] is None
    assert "The last day is before the first day." in response.content.decode()


def test_a_period_ending_on_the_last_date_there_is_is_a_form_error_not_a_server_error(django_user_model):
    """(Its end is counted up to the midnight after it, and 9999-12-31 has none.)"""
    browser = staff_browser(django_user_model, "audra", "auditor")

    response = browser.get(PAGE, {"start": "2026-11-01", "end": "9999-12-31"})

    assert response.status_code == 200 and response.context["report"] is None
    assert "The last day may be 9999-12-30 at the latest." in response.content.decode()


def test_the_report_counts_a_period_ending_on_the_last_day_it_allows(api_client):
    report = transparency_report(start=date(9999, 12, 1), end=date(9999, 12, 30))

    assert report["period"]["until"] == "9999-12-31T00:00:00+00:00"


def test_staff_without_the_view_permission_are_refused_and_not_shown_the_link(django_user_model):
    browser = staff_browser(django_user_model, "nobody", None)
    browser.user.user_permissions.add(Permission.objects.get(codename="view_decision"))

    assert browser.get(PAGE).status_code == 403
    assert "transparency-report-link" not in browser.get("/admin/").content.decode()


def test_the_admin_index_links_the_report_for_those_who_may_view_it(django_user_model):
    browser = staff_browser(django_user_model, "audra", "auditor")

    index = browser.get("/admin/").content.decode()

    assert 'id="transparency-report-link"' in index and PAGE in index
