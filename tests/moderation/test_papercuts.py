"""What an outside probe and a new user found in the workplace and the commands: an honest
metric, admin edge cases, and commands that say what is wrong instead of a traceback."""

from __future__ import annotations

import io
import subprocess
import sys
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from audit.models import EventKind, PipelineEvent
from moderation import services
from moderation.models import ContentReview
from tests.helpers import claimed, decided, staff_browser, submit
from tests.moderation.test_workplace import LIST, messages_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def moderator(django_user_model):
    return staff_browser(django_user_model, "mia", "moderator")


def test_a_bulk_escalation_that_skips_decided_reviews_counts_no_illegal_transition(moderator, api_client, client, settings):
    decided_ones = [decided(api_client, label) for label in ("approved", "rejected", "manual_review")]
    waiting = submit(api_client)
    data = {"action": "escalate_selected", "_selected_action": [str(r.pk) for r in [*decided_ones, waiting]],
            "apply": "1", "reason": "spam wave"}

    response = moderator.post(LIST, data, follow=True)

    assert any("1 escalated" in m and "skipped" in m for m in messages_of(response)), messages_of(response)
    assert not PipelineEvent.objects.filter(kind=EventKind.ILLEGAL_TRANSITION).exists()
    settings.METRICS_TOKEN, settings.METRICS_CACHE_S = "scrape-me", 0
    metrics = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-me").content.decode()
    assert "moderation_illegal_transitions_total 0.0" in metrics


def test_a_bulk_override_that_skips_undecided_reviews_counts_no_illegal_transition(moderator, api_client):
    waiting, working = submit(api_client), claimed(api_client)[0]
    data = {"action": "override_selected", "_selected_action": [str(waiting.pk), str(working.pk)], "apply": "1",
            "label": "rejected", "category": "spam", "reason": "spam wave"}

    response = moderator.post(LIST, data, follow=True)

    assert any("2 skipped: not decided yet" in m for m in messages_of(response)), messages_of(response)
    assert not PipelineEvent.objects.filter(kind=EventKind.ILLEGAL_TRANSITION).exists()


def test_escalating_a_decided_review_is_refused_as_not_applicable(api_client, moderator):
    from moderation.errors import NotApplicable

    review = decided(api_client, "approved")
    with pytest.raises(NotApplicable, match="already approved"):
        services.review_escalate(review_id=review.pk, reason="why", moderator=moderator.user)
    assert ContentReview.objects.get(pk=review.pk).status == "approved"


def test_a_nul_in_a_list_filter_is_a_bad_request_not_a_server_error(moderator):
    assert moderator.get(LIST, {"status__exact": "\x00"}).status_code == 400
    assert moderator.get(LIST, {"q": "abc\x00"}).status_code == 400


def test_releasing_without_permission_is_refused_and_releasing_what_you_do_not_hold_says_so(
    api_client, moderator, django_user_model
):
    review = decided(api_client, "manual_review")
    auditor = staff_browser(django_user_model, "ada", "auditor")
    assert auditor.post(f"{LIST}{review.pk}/release/").status_code == 403

    response = moderator.post(f"{LIST}{review.pk}/release/", follow=True)

    assert messages_of(response) == ["Not returned to the queue: you do not hold this review."]


def test_the_review_list_shows_the_newest_first(api_client, moderator):
    first, second, third = (submit(api_client) for _ in range(3))
    # Ids are time-ordered, and the admin falls back to -pk: that order alone would pass. The
    # first review is made the newest by its creation time, so only the list's ordering passes.
    ContentReview.objects.filter(pk=first.pk).update(created_at=third.created_at + timedelta(seconds=1))
    page = moderator.get(LIST)
    ids = [str(r.pk) for r in page.context["cl"].result_list]
    assert ids[:3] == [str(first.pk), str(third.pk), str(second.pk)]


def test_reprocess_since_a_word_is_an_argument_error_not_a_traceback():
    from django.conf import settings

    process = subprocess.run([sys.executable, "manage.py", "reprocess_reviews", "--since", "yesterday"],
                             cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=60)
    assert process.returncode == 2, process.stderr
    assert "error: argument --since: 'yesterday' is not an ISO date" in process.stderr
    assert "Traceback" not in process.stderr


def test_review_timeline_accepts_the_short_id_the_admin_list_shows(api_client):
    review, _ = claimed(api_client)
    out = io.StringIO()
    call_command("review_timeline", review.short_id, stdout=out)
    assert out.getvalue().startswith(f"review {review.pk}")
    out = io.StringIO()
    call_command("review_timeline", str(review.pk)[:23], stdout=out)  # the start of the id works too
    assert out.getvalue().startswith(f"review {review.pk}")
    with pytest.raises(CommandError, match="not a review id"):
        call_command("review_timeline", "abc")
    with pytest.raises(CommandError, match="no review"):
        call_command("review_timeline", "00000000")
