from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError

from moderation import services
from moderation.models import ModerationPolicy
from tests.helpers import decided


@pytest.fixture
def staff(client, django_user_model):
    user = django_user_model.objects.create_superuser("boss", password="pw-12345-long")
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_review_pages_render_and_offer_no_way_to_set_status_or_decision(staff, api_client):
    review = decided(api_client, "rejected")

    listing = staff.get("/admin/moderation/contentreview/?status__exact=rejected")
    page = staff.get(f"/admin/moderation/contentreview/{review.pk}/change/")
    history = staff.get(f"/admin/moderation/contentreview/{review.pk}/history/")

    assert listing.status_code == page.status_code == history.status_code == 200
    assert str(review.pk) in listing.content.decode()
    form = page.context["adminform"].form
    assert "status" not in form.fields and "decision" not in form.fields
    # Posting a status anyway changes nothing.
    staff.post(f"/admin/moderation/contentreview/{review.pk}/change/", {"status": "approved"})
    review.refresh_from_db()
    assert review.status == "rejected"


@pytest.mark.django_db
def test_history_cannot_be_reverted_into_the_row(staff, api_client):
    review = decided(api_client, "approved")
    first = review.history.earliest("history_date")
    url = f"/admin/moderation/contentreview/{review.pk}/history/{first.history_id}/"

    page = staff.get(url)
    posted = staff.post(url, {"_save": "Save"})

    assert page.status_code == 200 and b'name="_save"' not in page.content
    assert posted.status_code == 403
    review.refresh_from_db()
    assert (review.status, review.version) == ("approved", 3)


# The human-queue fields, the rules for authors and the notices a policy form posts (prefilled
# from the active version in the admin).
WORKPLACE_FIELDS = {"categories": '["harassment", "spam"]', "priority_score_weight": 100, "priority_report_weight": 15,
                    "priority_appeal_weight": 40, "priority_age_points_per_hour": 10, "priority_strike_weight": 5,
                    "strike_points": '{"hate": 3}', "strike_window_days": 90,
                    "enforcement_ladder": '[{"points": 3, "action": "warn"}, {"points": 5, "action": "suspend", "days": 7}]',
                    "while_restricted": "manual_review", "appeal_window_days": 183, "notice_templates": "{}",
                    "report_expiry_days": 30, "pile_on_reports": 4, "pile_on_minutes": 10}


@pytest.mark.django_db
def test_saving_a_policy_publishes_a_new_version_and_keeps_the_old(staff):
    assert staff.get("/admin/moderation/moderationpolicy/add/").context["adminform"].form.initial["reject_threshold"] == 0.9

    response = staff.post(
        "/admin/moderation/moderationpolicy/add/",
        {"reject_threshold": 0.8, "review_threshold": 0.3, "category_thresholds": '{"violence": {"reject": 0.5}}',
         "flagged_label": "manual_review", "report_threshold": 5, "notes": "stricter", **WORKPLACE_FIELDS},
    )

    assert response.status_code == 302
    assert list(ModerationPolicy.objects.order_by("version").values_list("version", "reject_threshold")) == [(1, 0.9), (2, 0.8)]
    newest = ModerationPolicy.objects.get(version=2)
    assert newest.created_by.username == "boss" and newest.report_threshold == 5
    assert newest.history.count() == 1


@pytest.mark.django_db
def test_an_invalid_policy_form_is_refused(staff):
    response = staff.post(
        "/admin/moderation/moderationpolicy/add/",
        {"reject_threshold": 0.3, "review_threshold": 0.6, "category_thresholds": "{}", "flagged_label": "approved",
         "report_threshold": 3, **WORKPLACE_FIELDS},
    )
    assert response.status_code == 200
    assert "review &lt;= reject" in response.content.decode() or "review <= reject" in response.content.decode()
    assert ModerationPolicy.objects.count() == 1


@pytest.mark.django_db
def test_a_notice_template_with_an_unknown_placeholder_is_refused_by_the_form(staff):
    response = staff.post(
        "/admin/moderation/moderationpolicy/add/",
        {"reject_threshold": 0.9, "review_threshold": 0.5, "category_thresholds": "{}", "flagged_label": "manual_review",
         "report_threshold": 3, **WORKPLACE_FIELDS, "notice_templates": '{"en": "Appeal by {deadline}"}'},
    )
    assert response.status_code == 200
    assert "notice_templates.en: unknown placeholders {deadline}" in response.content.decode()
    assert ModerationPolicy.objects.count() == 1


@pytest.mark.django_db
def test_a_published_policy_cannot_be_edited_or_deleted(staff):
    policy = ModerationPolicy.objects.get()
    staff.post(f"/admin/moderation/moderationpolicy/{policy.pk}/change/", {"reject_threshold": 0.1, "review_threshold": 0.05})
    policy.refresh_from_db()
    assert policy.reject_threshold == 0.9
    assert staff.post(f"/admin/moderation/moderationpolicy/{policy.pk}/delete/", {"post": "yes"}).status_code == 403
    assert ModerationPolicy.objects.filter(pk=policy.pk).exists()


@pytest.mark.django_db
def test_the_policy_forms_dsa_mapping_is_prefilled_validated_and_published(staff):
    from moderation.models import default_dsa_mapping

    initial = staff.get("/admin/moderation/moderationpolicy/add/").context["adminform"].form.initial
    assert initial["dsa_mapping"] == default_dsa_mapping()
    base = {"reject_threshold": 0.9, "review_threshold": 0.5, "category_thresholds": "{}", "flagged_label": "manual_review",
            "report_threshold": 3, **WORKPLACE_FIELDS}
    mapping = default_dsa_mapping()
    mapping["categories"]["spam"]["category"] = "STATEMENT_CATEGORY_SPAM"  # not one of the database's

    refused = staff.post("/admin/moderation/moderationpolicy/add/", {**base, "dsa_mapping": json.dumps(mapping)})

    assert refused.status_code == 200 and "STATEMENT_CATEGORY_SPAM" in refused.content.decode()
    assert ModerationPolicy.objects.count() == 1
    mapping["categories"]["spam"]["category"] = "STATEMENT_CATEGORY_SCAMS_AND_FRAUD"
    published = staff.post("/admin/moderation/moderationpolicy/add/", {**base, "dsa_mapping": json.dumps(mapping)})
    assert published.status_code == 302
    newest = ModerationPolicy.objects.get(version=2)
    assert newest.dsa_mapping["categories"]["spam"]["category"] == "STATEMENT_CATEGORY_SCAMS_AND_FRAUD"


@pytest.mark.django_db
def test_publishing_from_the_policy_form_keeps_the_hash_banks_and_sets_the_image_fields(staff):
    """Banks are published by `hash_banks import --publish`, not edited in the form: a version
    published from the form keeps the banks of the version it was filled from, never none."""
    from tests.helpers_media import bank_publish

    with_bank = bank_publish("known-bad", ["0" * 63 + "1"])
    form = staff.get("/admin/moderation/moderationpolicy/add/").context["adminform"].form
    assert form.initial["image_fallback"] == "manual_review" and form.initial["pdq_distance"] == 31

    response = staff.post("/admin/moderation/moderationpolicy/add/", {
        "reject_threshold": 0.9, "review_threshold": 0.5, "category_thresholds": "{}", "flagged_label": "manual_review",
        "report_threshold": 3, **WORKPLACE_FIELDS, "pdq_distance": 20, "image_fallback": "approved",
        "based_on": with_bank.version,
    })

    assert response.status_code == 302, response.content.decode()[:2000]
    newest = ModerationPolicy.objects.order_by("-version").first()
    assert newest.version == with_bank.version + 1
    assert newest.hash_banks == with_bank.hash_banks and newest.pdq_distance == 20 and newest.image_fallback == "approved"


@pytest.mark.django_db
def test_an_api_client_changed_in_the_admin_is_saved_by_its_service_which_records_who(staff):
    client, _ = services.api_client_create(name="acme-admin")

    response = staff.post(f"/admin/moderation/apiclient/{client.pk}/change/", {"name": " acme-renamed ", "webhook_url": ""})

    assert response.status_code == 302
    client.refresh_from_db()
    assert client.name == "acme-renamed"
    changed = client.history.latest("history_id")
    assert (changed.name, changed.history_user.username, changed.history_change_reason) == (
        "acme-renamed", "boss", "changed name")
    # The history keeps no copy of its secrets.
    assert not {"token_hash", "webhook_secret"} & {f.name for f in changed._meta.fields}


@pytest.mark.django_db
def test_an_api_client_keeps_a_name_no_other_client_has():
    client, _ = services.api_client_create(name="acme")
    services.api_client_create(name="globex")
    with pytest.raises(ValidationError, match="already exists"):
        services.api_client_update(client_id=client.pk, name="globex")
    with pytest.raises(ValidationError, match="needs a name"):
        services.api_client_update(client_id=client.pk, name="  ")
    client.refresh_from_db()
    assert client.name == "acme"
