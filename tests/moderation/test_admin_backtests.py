"""Draft -> backtest -> activate in the admin: a supervisor saves a draft, backtests it as a job
with a progress page, reads its figures beside the active version's, and activates it; a
moderator can read but not act; a review in a queue the viewer cannot open is counted, not shown."""

from __future__ import annotations

import pytest

from moderation import services, tasks
from moderation.models import Backtest, BacktestStatus, ModerationPolicy, ModerationQueue
from moderation.quality import backtests
from tests.helpers import queued_tasks, staff_browser
from tests.moderation.test_backtests import TIMID, draft_of, human_decided, moderator  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db


@pytest.fixture
def supervisor(django_user_model):
    return staff_browser(django_user_model, "sup-1", "supervisor")


@pytest.fixture
def reader(django_user_model):
    return staff_browser(django_user_model, "mod-2", "moderator")


def page(browser, policy) -> str:
    response = browser.get(f"/admin/moderation/moderationpolicy/{policy.pk}/change/")
    assert response.status_code == 200
    return response.content.decode()


def test_the_add_form_saves_a_draft_that_acts_on_nothing(supervisor):
    active = services.policy_active()
    form = supervisor.get("/admin/moderation/moderationpolicy/add/").context["adminform"].form
    data = {name: value for name, value in form.initial.items() if value is not None}
    post = {**{k: (v if isinstance(v, (str, int, float)) else __import__("json").dumps(v)) for k, v in data.items()},
            "as_draft": "on", "reject_threshold": "0.8", "notes": "stricter"}
    response = supervisor.post("/admin/moderation/moderationpolicy/add/", post)

    assert response.status_code == 302, response.content.decode()[:2000]
    draft = ModerationPolicy.objects.get(version=active.version + 1)
    assert draft.is_draft and draft.reject_threshold == 0.8 and services.policy_active() == active
    html = page(supervisor, draft)
    assert "acts on nothing" in html and 'id="no-backtest"' in html and 'id="activate"' in html


def test_backtest_then_activate_from_the_drafts_page(supervisor, human_decided, local, on_commit_callbacks_run):  # noqa: F811
    active = services.policy_active()
    draft = draft_of(category_thresholds=TIMID)

    response = supervisor.post(f"/admin/moderation/moderationpolicy/{draft.pk}/backtest/", {"limit": "100"})
    backtest = Backtest.objects.get()
    assert response.status_code == 302 and response["Location"].endswith(f"/backtest/{backtest.pk}/page/")
    running = supervisor.get(response["Location"]).content.decode()
    assert 'http-equiv="refresh"' in running and 'id="backtest-progress"' in running and "backtest-cancel" in running

    [job] = queued_tasks("moderation.tasks.backtest_run")
    tasks.backtest_run(**job["kwargs"])
    backtest.refresh_from_db()
    assert backtest.status == BacktestStatus.DONE
    done = supervisor.get(f"/admin/moderation/backtest/{backtest.pk}/page/").content.decode()
    assert 'http-equiv="refresh"' not in done and done.count('class="backtest-change"') == backtest.changed >= 1
    assert done.count('class="backtest-row"') == len(backtest.figures["slices"])

    html = page(supervisor, draft)
    assert f"backtest {backtest.pk}" in html and 'class="backtest-row"' in html and "no-backtest" not in html
    response = supervisor.post(f"/admin/moderation/moderationpolicy/{draft.pk}/activate/",
                               {"expected_active": str(active.version)})
    assert response.status_code == 302
    assert services.policy_active().pk == draft.pk
    assert "Activated" in page(supervisor, ModerationPolicy.objects.get(pk=draft.pk))


def test_activation_compared_with_a_gone_version_is_refused_with_why(supervisor):
    active = services.policy_active()
    draft = draft_of()
    response = supervisor.post(f"/admin/moderation/moderationpolicy/{draft.pk}/activate/",
                               {"expected_active": str(active.version - 1)}, follow=True)
    assert "Not activated" in response.content.decode() and services.policy_active() == active


def test_a_moderator_reads_but_cannot_backtest_activate_or_cancel(reader, supervisor):
    draft = draft_of()
    assert 'id="activate"' not in page(reader, draft) and 'id="backtest-start"' not in page(reader, draft)
    assert reader.post(f"/admin/moderation/moderationpolicy/{draft.pk}/backtest/", {}).status_code == 403
    assert reader.post(f"/admin/moderation/moderationpolicy/{draft.pk}/activate/",
                       {"expected_active": "1"}).status_code == 403
    backtest = backtests.backtest_start(candidate=draft, provider_name="local", enqueue=False)
    assert reader.post(f"/admin/moderation/backtest/{backtest.pk}/cancel/").status_code == 403
    assert supervisor.post(f"/admin/moderation/backtest/{backtest.pk}/cancel/").status_code == 302
    assert Backtest.objects.get(pk=backtest.pk).cancel_requested_at is not None
    assert services.policy_active().pk != draft.pk


def test_changed_reviews_in_a_queue_the_viewer_cannot_open_are_counted_not_shown(
        supervisor, reader, human_decided, local, django_user_model):  # noqa: F811
    from django.contrib.auth.models import Group

    draft = draft_of(category_thresholds=TIMID)
    backtest = backtests.backtest_start(candidate=draft, provider_name="local", enqueue=False)
    backtests.backtest_run(backtest_id=backtest.pk, deadline=__import__("time").monotonic() + 5, enqueue_rest=False)
    backtest.refresh_from_db()
    # One changed review's last queue is a restricted one the moderator is not a member of.
    secret = ModerationQueue.objects.create(slug="secret", name="Secret")
    secret.groups.add(Group.objects.create(name="secret-team"))
    hidden_review = backtest.changes[0]["review"]
    type(human_decided[0]).objects.filter(pk=hidden_review).update(last_queue="secret")

    html = reader.get(f"/admin/moderation/backtest/{backtest.pk}/page/").content.decode()
    assert html.count('class="backtest-change"') == backtest.changed - 1 and 'id="backtest-hidden"' in html
    assert hidden_review not in html
