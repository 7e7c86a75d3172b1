"""The term editor in a real browser: edit -> preview -> publish. The publish button comes only
with the preview, after its diff and dry run; a draft edited after its preview is refused with
what was typed kept, and published once previewed again. With UPDATE_SCREENSHOTS=1 the
screenshot goes to docs/screenshots/."""

from __future__ import annotations

import json

import pytest

from moderation import services
from moderation.models import ModerationPolicy
from tests.browser.test_moderator_flow import CHROMIUM, chromium, log_in, shots, staff  # noqa: F401  (shots: a fixture)
from tests.moderation.test_term_editor import overridden, provider_decided

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM, reason="no Chromium installed: apt-get install chromium (.ci/run does)"),
]


def test_a_supervisor_previews_a_term_then_publishes_exactly_what_was_previewed(
    live_server, api_client, django_user_model, shots  # noqa: F811
):
    moderator = staff(django_user_model, "mia", "moderator")
    insult = provider_decided(api_client, "What a muppet that driver was on the road to work today.", "manual_review")
    film = provider_decided(api_client, "The muppet movie was great fun for the whole family tonight.", "manual_review")
    provider_decided(api_client, "Honestly you are a total muppet and everyone here knows it.", "approved")
    provider_decided(api_client, "Thanks for the lovely dinner on Sunday, see you again soon.", "approved")
    overridden(insult, "rejected", moderator, "harassment")
    overridden(film, "approved", moderator)
    staff(django_user_model, "sam", "supervisor")

    with chromium() as browser:
        page = log_in(browser, live_server, "sam")
        page.goto(f"{live_server.url}/admin/moderation/moderationpolicy/terms/")
        before_preview = page.locator("#publish").count()
        page.fill("#id_category", "harassment")
        page.fill("textarea[name=terms]", "muppet")
        page.click("#preview")
        page.wait_for_selector("#dry-run-summary")
        changed = page.inner_text("#verdicts-changed")
        breakdown = page.inner_text("#verdict-changes")
        agreement = page.inner_text("#moderator-agreement")
        disagreements = page.inner_text("#disagreements tbody")
        # The button is below the diff and the dry run: further down the page than both.
        order = page.evaluate("""() => ['#diff', '#dry-run', '#publish'].map(
            s => document.querySelector(s).getBoundingClientRect().top + window.scrollY)""")
        page.locator("#content-main").screenshot(path=str(shots / "term-editor-preview.png"))

        # An edit after the preview: publishing it is refused, and the edit is still there.
        page.fill("textarea[name=terms]", "muppet\nnitwit")
        page.click("#publish")
        page.wait_for_selector("#refusal")
        refusal = page.inner_text("#refusal")
        kept = page.input_value("textarea[name=terms]")
        diff_now = page.inner_text("#diff")
        # This page previews what is typed now: publishing it goes through.
        page.click("#publish")
        page.wait_for_selector(".messagelist")
        message = page.inner_text(".messagelist")

    assert before_preview == 0
    assert changed.startswith("3 of 4 verdicts change")
    assert breakdown.splitlines() == ["manual_review → rejected: 2", "approved → rejected: 1"]
    assert agreement.startswith("Agrees with moderators on 1 of 2 (before: 0 of 2)")
    assert "The muppet movie" in disagreements and "What a muppet" not in disagreements
    assert order[0] < order[1] < order[2]
    assert refusal == "Not published: the draft changed since its preview: check the diff and dry run below, then publish again"
    assert kept == "muppet\nnitwit" and "+muppet +nitwit" in diff_now
    assert message == "Published policy version 2."
    assert ModerationPolicy.objects.count() == 2
    # The new list beside version 1's (the default term lists a fresh installation starts with).
    assert sorted(map(_canonical, services.policy_active().term_lists)) == sorted(map(_canonical, [
        {"category": "harassment", "action": "reject", "language": "", "terms": ["muppet", "nitwit"]},
        *ModerationPolicy.objects.get(version=1).term_lists]))


def _canonical(term_list: dict) -> str:
    return json.dumps(term_list, sort_keys=True)
