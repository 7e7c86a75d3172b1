"""The decide panel's form (canned picks, free text, "send to the user") and what a refusal shows
back: after any refusal the panel comes back as typed, with the refusal's reason
(docs/workplace.md, "Canned reasons", "Nothing typed is lost")."""

from __future__ import annotations

import pytest
from django.utils.html import escape
from hypothesis import HealthCheck, given, settings as hypothesis_settings, strategies as st

from moderation import services
from moderation.admin.review_forms import BulkOverrideForm, DecideForm
from moderation.models import ContentReview, ModerationPolicy
from tests.helpers import examples, decided, staff_browser

LIST = "/admin/moderation/contentreview/"


@pytest.fixture
def mia(db, django_user_model):
    return staff_browser(django_user_model, "mia", "moderator")


@pytest.fixture
def sam(db, django_user_model):
    return staff_browser(django_user_model, "sam", "moderator")


def decide(browser, review, **data):
    return browser.post(f"{LIST}{review.pk}/act/override/", data)


@pytest.mark.django_db
class TestTheForm:
    def test_it_reads_the_picks_of_the_chosen_category_as_codes(self):
        form = DecideForm({"label": "rejected", "category": "hate", "reason_codes": ["hate:slur", "hate:dehumanising"],
                           "version": 1})
        assert form.is_valid(), form.errors
        assert (form.cleaned_data["reason_codes"], form.cleaned_data["reason"], form.cleaned_data["share_reason"]) == (
            ["slur", "dehumanising"], "", False)

    def test_a_pick_of_another_category_is_an_error_on_the_picks(self):
        form = DecideForm({"label": "rejected", "category": "hate", "reason_codes": ["spam:commercial"], "version": 1})
        assert not form.is_valid()
        assert form.errors["reason_codes"] == ["commercial: not a reason of the category hate"]
        approval = DecideForm({"label": "approved", "reason_codes": ["hate:slur"], "version": 1})
        assert approval.errors["reason_codes"] == ["slur: not a reason of an approval"]

    def test_the_choices_are_the_active_policys_and_grouped_by_category(self):
        services.policy_publish_change(lambda active: {"canned_reasons": {
            "_approval": [{"code": "ok", "texts": {"en": "Fine."}}],
            "spam": [{"code": "ad", "texts": {"en": "An ad."}}, {"code": "bot", "texts": {"en": "A bot."}}]}})
        groups = DecideForm().reason_groups()
        assert [(g["key"], [b.data["value"] for b in g["boxes"]]) for g in groups] == [
            ("_approval", ["_approval:ok"]), ("spam", ["spam:ad", "spam:bot"])]

    def test_the_bulk_override_form_takes_the_same_reason_fields(self):
        form = BulkOverrideForm({"label": "rejected", "category": "spam", "reason_codes": ["spam:scam"]})
        assert form.is_valid(), form.errors
        assert form.cleaned_data["reason_codes"] == ["scam"]
        assert list(form.fields)[:5] == ["label", "category", "reason_codes", "reason", "share_reason"]


@pytest.mark.django_db
class TestNothingTypedIsLost:
    TYPED = {"label": "rejected", "category": "hate", "reason_codes": ["hate:slur"],
             "reason": "Second line: a slur <b>bold</b>", "note": "Same author as ticket 77."}

    def assert_typed_back(self, response, review, *, refusal: str):
        html = response.content.decode()
        assert refusal in " ".join(str(m) for m in response.context["messages"])
        form = response.context["decide_form"]
        assert form.data["reason"] == self.TYPED["reason"] and form.data["note"] == self.TYPED["note"]
        assert form.data.getlist("reason_codes") == ["hate:slur"] and form.data["category"] == "hate"
        assert escape(self.TYPED["reason"]) in html and "<b>bold</b>" not in html
        assert 'value="hate:slur"' in html.split('id="reasons-hate"')[1].split("</fieldset>")[0]
        assert 'checked' in html.split('value="hate:slur"')[1].split(">")[0]
        assert '<option value="hate" selected>' in html and 'value="rejected"' in html
        # The panel now carries the version the page shows: deciding again decides the review as it is.
        assert form.data["version"] == ContentReview.objects.get(pk=review.pk).version

    def test_a_stale_refusal_shows_what_changed_and_keeps_the_form_as_typed(self, api_client, mia, sam):
        review = decided(api_client, "manual_review")
        seen = review.version
        services.review_override(review_id=review.pk, label="approved", moderator=sam.user)  # meanwhile
        response = decide(mia, review, **self.TYPED, version=seen)
        assert response.status_code == 409
        self.assert_typed_back(response, review, refusal="Nothing was applied")
        again = decide(mia, review, **self.TYPED, version=response.context["decide_form"].data["version"])
        assert again.status_code == 302
        review.refresh_from_db()
        assert (review.status, review.decision.reason_codes) == ("rejected", ["slur"])

    def test_another_moderators_lease_refuses_and_keeps_the_form_as_typed(self, api_client, mia, sam):
        review = decided(api_client, "manual_review")
        assert services.review_take_next(moderator=sam.user).pk == review.pk
        response = decide(mia, review, **self.TYPED, version=review.version)
        assert response.status_code == 409
        self.assert_typed_back(response, review, refusal="sam is reviewing this")

    def test_a_missing_category_refuses_and_keeps_the_rest_as_typed(self, api_client, mia):
        review = decided(api_client, "manual_review")
        response = decide(mia, review, **{**self.TYPED, "category": "", "reason_codes": []}, version=review.version)
        assert response.status_code == 400
        assert "a rejection needs a violation category" in response.context["decide_form"].errors["category"]
        assert escape(self.TYPED["reason"]) in response.content.decode()
        assert ContentReview.objects.get(pk=review.pk).status == "manual_review"

    def test_a_review_that_went_back_to_the_provider_shows_what_was_typed_to_copy(self, api_client, mia):
        review = decided(api_client, "manual_review")
        seen = review.version
        services.review_reprocess(review_id=review.pk, actor="admin", actor_id="sam", reason="new model")
        response = decide(mia, review, **self.TYPED, version=seen)
        html = response.content.decode()
        assert response.status_code == 409 and response.context["decide_form"] is None
        typed = html.split('id="typed-back"')[1]
        assert escape(self.TYPED["reason"]) in typed and self.TYPED["note"] in typed and "slur" in typed

    def test_the_category_is_required_in_the_browser_when_rejecting(self, api_client, mia):
        html = mia.get(f"{LIST}{decided(api_client, 'manual_review').pk}/timeline/").content.decode()
        assert 'category.required = chosenLabel() === "rejected"' in html


@pytest.mark.django_db
@hypothesis_settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reason=st.text(max_size=300), note=st.text(max_size=300))
def test_any_text_comes_back_escaped_after_a_refusal_and_never_breaks_the_page(api_client, mia, reason, note):
    review = ContentReview.objects.filter(status="manual_review").first() or decided(api_client, "manual_review")
    response = decide(mia, review, label="rejected", category="", reason=reason, note=note, version=review.version)
    assert response.status_code == 400
    html = response.content.decode()
    for text in (reason, note):
        if "\x00" not in text:
            assert escape(text) in html
    assert ModerationPolicy.objects.count() == 1


@pytest.mark.django_db
def test_a_bulk_rejection_takes_a_canned_reason_and_no_free_text(api_client, mia):
    reviews = [decided(api_client, "manual_review") for _ in range(2)]
    data = {"action": "override_selected", "_selected_action": [str(r.pk) for r in reviews], "apply": "1",
            "label": "rejected", "category": "spam", "reason_codes": ["spam:commercial"],
            **{f"version_{r.pk}": str(r.version) for r in reviews}}
    response = mia.post(LIST, data, follow=True)
    assert [str(m) for m in response.context["messages"]] == ["2 overridden."]
    decisions = [ContentReview.objects.get(pk=r.pk).decision for r in reviews]
    assert [(d.category, d.reason_codes, d.reason) for d in decisions] == [("spam", ["commercial"], "")] * 2
