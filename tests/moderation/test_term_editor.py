"""The term editor's flow, edit -> preview -> publish: a publish carries the signed digest of the
draft that was previewed and the version it was previewed against, and the server publishes
that draft or nothing (moderation/admin/term_lists.py, services.policy_publish_previewed); the
dry run's summary, "N of M verdicts change", and its agreement with moderators' decisions
(moderation/observability/dry_run.py)."""

from __future__ import annotations

import re
import uuid

import pytest
from django.core import signing
from hypothesis import example, given

from moderation import services
from moderation.errors import DraftChanged, DraftNotPreviewed, PolicyChanged
from moderation.models import ContentReview, ModerationPolicy
from moderation.observability.dry_run import dry_run_summary, policy_dry_run
from moderation.text.rules import term_lists_digest, term_lists_with
from tests.helpers import collide, result
from tests.moderation.test_admin_hidden_characters import FEW, WEIRD
from tests.moderation.test_policy_terms import DEFAULT_ID_REJECTS, TERMS_URL, form, previewed, rule_terms

MUPPET = [{"category": "harassment", "action": "reject", "language": "", "terms": ["muppet"]}]


@pytest.fixture
def staff(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("boss", password="pw-12345-long"))
    return client


@pytest.fixture
def moderator(django_user_model):
    return django_user_model.objects.create_user("mia", password="pw-12345-long", is_staff=True)


@pytest.fixture
def detector_loaded():
    """The language detector in this process, so a dry run detects here (the same answers,
    moderation.text.language.detect_many) rather than start a subprocess for each example."""
    from moderation.text.language import detector

    detector()


def draft_with(term_lists: list[dict]) -> ModerationPolicy:
    return services.policy_draft(services.policy_active(), term_lists=term_lists)


def provider_decided(client, text: str, label: str) -> ContentReview:
    """A review the provider decided with a score the initial policy maps to `label`."""
    score = {"approved": 0.1, "manual_review": 0.6, "rejected": 0.95}[label]
    review, _ = services.review_submit(client=client, external_id=uuid.uuid4().hex, kind="text", text=text)
    request = services.review_claim(review_id=review.pk, worker_id="worker-1")
    assert services.review_finalize(idempotency_key=request.idempotency_key, result=result(score),
                                    cause="provider_result") == "applied"
    review.refresh_from_db()
    assert review.status == label, (text, review.status)
    return review


def overridden(review: ContentReview, label: str, moderator, category: str = "") -> ContentReview:
    services.review_override(review_id=review.pk, label=label, reason="read it whole", moderator=moderator,
                             category=category)
    review.refresh_from_db()
    return review


@pytest.mark.django_db
class TestPublishPreviewed:
    def test_a_draft_never_previewed_is_refused_and_nothing_is_published(self):
        draft = draft_with(MUPPET)
        with pytest.raises(DraftNotPreviewed, match="never previewed"):
            services.policy_publish_previewed(draft=draft, previewed_digest=None, previewed_version=1)
        assert ModerationPolicy.objects.count() == 1

    def test_a_draft_other_than_the_previewed_one_is_refused(self):
        shown = draft_with(MUPPET)
        tampered = draft_with(term_lists_with(MUPPET, category="harassment", action="reject", add=["idiot"]))
        with pytest.raises(DraftChanged, match="changed since its preview") as refused:
            services.policy_publish_previewed(draft=tampered, previewed_digest=term_lists_digest(shown.term_lists),
                                              previewed_version=1)
        assert refused.value.previewed == term_lists_digest(shown.term_lists)
        assert refused.value.actual == term_lists_digest(tampered.term_lists)
        assert ModerationPolicy.objects.count() == 1

    def test_a_draft_previewed_against_an_older_version_is_refused(self):
        draft = draft_with(MUPPET)
        services.policy_publish(reject_threshold=0.8, review_threshold=0.4)
        with pytest.raises(PolicyChanged, match="policy v2 was published since v1"):
            services.policy_publish_previewed(draft=draft, previewed_digest=term_lists_digest(draft.term_lists),
                                              previewed_version=1)
        assert services.policy_active().term_lists == []

    def test_the_previewed_draft_is_published_exactly(self):
        draft = draft_with(MUPPET)
        published = services.policy_publish_previewed(
            draft=draft, previewed_digest=term_lists_digest(draft.term_lists), previewed_version=1)
        assert published.version == 2 and published.term_lists == MUPPET
        assert term_lists_digest(services.policy_active().term_lists) == term_lists_digest(draft.term_lists)


def test_the_digest_is_of_a_canonical_json_so_key_order_does_not_count_and_any_string_hashes():
    reordered = [{"terms": ["muppet"], "language": "", "action": "reject", "category": "harassment"}]
    assert term_lists_digest(reordered) == term_lists_digest(MUPPET)
    assert term_lists_digest(MUPPET) != term_lists_digest([{**MUPPET[0], "terms": ["muppet", "idiot"]}])
    assert re.fullmatch("[0-9a-f]{64}", term_lists_digest([{**MUPPET[0], "terms": ["\ud800", "\u202e🤬"]}]))


@pytest.mark.django_db(transaction=True)
def test_two_supervisors_publishing_previews_of_one_version_at_once_publish_one(django_user_model):
    """Both previewed against v1 and press Publish together: one is published, the other is
    refused. Without the version check under the publishing lock (`based_on`), both publish, and
    the second silently drops the first's terms, which its supervisor never saw in a diff."""
    services.policy_active()
    drafts = [draft_with([{**MUPPET[0], "category": f"cat{n}"}]) for n in range(2)]

    results = collide(2, lambda n: services.policy_publish_previewed(
        draft=drafts[n], previewed_digest=term_lists_digest(drafts[n].term_lists), previewed_version=1),
        expect=PolicyChanged)

    assert sorted(type(r).__name__ for r in results) == ["ModerationPolicy", "PolicyChanged"], results
    [winner] = [r for r in results if isinstance(r, ModerationPolicy)]
    assert ModerationPolicy.objects.count() == 2
    assert services.policy_active().term_lists == winner.term_lists


@pytest.mark.django_db
class TestTheEditorPublishesOnlyThePreview:
    def test_the_publish_button_comes_after_the_diff_and_the_dry_run(self, staff):
        assert b'id="publish"' not in staff.get(TERMS_URL).content  # nothing to publish before a preview
        html = staff.post(TERMS_URL, form(preview="1", dry_texts="dasar bodoh kamu")).content.decode()
        assert html.index('id="diff"') < html.index('id="dry-run-summary"') < html.index('id="dry-run"') \
            < html.index('id="publish"')
        assert 'form="term-lists-form"' in html  # the button submits the form above, as previewed

    def test_publishing_without_a_preview_is_refused_keeping_what_was_typed(self, staff):
        page = staff.post(TERMS_URL, form(publish="1", terms="bodoh\npandir", notes="typed by hand"))
        assert page.status_code == 200 and ModerationPolicy.objects.count() == 1
        html = page.content.decode()
        assert "Not published: the draft was never previewed: check the diff and dry run below" in html
        shown = page.context["form"]
        assert (shown["terms"].value(), shown["notes"].value()) == ("bodoh\npandir", "typed by hand")
        # ... and the page now shows that draft's preview, so publishing it again goes through.
        assert [(d.rule, d.added) for d in page.context["diff"]] == [("insult:reject:id", ("bodoh", "pandir"))]
        assert staff.post(TERMS_URL, previewed(page)).status_code == 302
        # Added to the default list's rule (moderation/data/terms), which the first version holds.
        assert rule_terms(services.policy_active().term_lists, ("insult", "reject", "id")) == [
            *DEFAULT_ID_REJECTS, "bodoh", "pandir"]

    def test_a_digest_the_server_did_not_sign_is_refused_as_never_previewed(self, staff):
        draft = draft_with(term_lists_with([], category="insult", action="reject", language="id",
                                           add=["bodoh", "goblok"]))
        forged = {"sha256": term_lists_digest(draft.term_lists), "version": 1}
        for token in (signing.dumps(forged, salt="another salt"), signing.dumps(forged)[:-2] + "xx",
                      f"{forged['sha256']}:1"):
            page = staff.post(TERMS_URL, form(publish="1", preview_token=token))
            assert "the draft was never previewed" in page.content.decode()
        assert ModerationPolicy.objects.count() == 1

    def test_a_draft_changed_after_its_preview_is_refused_and_previewed_again(self, staff):
        shown = previewed(staff.post(TERMS_URL, form(preview="1")))
        page = staff.post(TERMS_URL, {**shown, "terms": "bodoh\ngoblok\npandir"})
        assert page.status_code == 200 and ModerationPolicy.objects.count() == 1
        assert "Not published: the draft changed since its preview" in page.content.decode()
        assert page.context["form"]["terms"].value() == "bodoh\ngoblok\npandir"
        assert page.context["diff"][0].added == ("bodoh", "pandir")  # goblok is a default term already
        # The other fields are bound too: a changed mode or rule is another draft.
        for changed in ({"mode": "replace", "terms": "pandir"}, {"category": "spam"}, {"language": ""}):
            assert "changed since its preview" in staff.post(TERMS_URL, {**shown, **changed}).content.decode()
        assert ModerationPolicy.objects.count() == 1

    def test_a_preview_made_before_another_version_was_published_is_refused(self, staff):
        shown = previewed(staff.post(TERMS_URL, form(preview="1")))
        services.policy_publish(reject_threshold=0.8, review_threshold=0.4)
        page = staff.post(TERMS_URL, shown)
        assert "Not published: policy v2 was published since the preview (against v1)" in page.content.decode()
        assert services.policy_active().version == 2
        # The new preview is against v2, whose thresholds the draft now keeps.
        assert page.context["active"].version == 2 and page.context["draft"].reject_threshold == 0.8
        published = staff.post(TERMS_URL, previewed(page))
        assert published.status_code == 302
        active = services.policy_active()
        assert (active.version, active.reject_threshold, active.term_lists[0]["terms"]) == (3, 0.8, ["bodoh", "goblok"])

    def test_the_good_path_publishes_exactly_the_previewed_draft_from_an_uploaded_file(self, staff):
        from django.core.files.uploadedfile import SimpleUploadedFile

        page = staff.post(TERMS_URL, {**form(preview="1", terms="bodoh"),
                                      "upload": SimpleUploadedFile("list.txt", b"pandir # stupid\nbebal\n")})
        draft = page.context["draft"]
        assert page.context["digest"] == term_lists_digest(draft.term_lists)
        # The file's terms are in the text box now: the publish posts them, with no file.
        assert staff.post(TERMS_URL, previewed(page)).status_code == 302
        assert services.policy_active().term_lists == draft.term_lists
        assert rule_terms(draft.term_lists, ("insult", "reject", "id")) == [*DEFAULT_ID_REJECTS, "bodoh", "pandir", "bebal"]


@pytest.fixture
def decided_reviews(api_client, moderator):
    """Six reviews the provider decided under v1 (no term rules), four of them then decided by a
    moderator. The draft adds "muppet" as a harassment reject term."""
    reviews = {
        "insult": provider_decided(api_client, "Honestly you are a total muppet and everyone here knows it.", "approved"),
        "driver": provider_decided(api_client, "What a muppet that driver was on the road to work today.", "manual_review"),
        "film": provider_decided(api_client, "The muppet movie was great fun for the whole family tonight.", "manual_review"),
        "dinner": provider_decided(api_client, "Thanks for the lovely dinner on Sunday, see you again soon.", "approved"),
        "threat": provider_decided(api_client, "I know where you live and I will come by your house later.", "manual_review"),
        "meeting": provider_decided(api_client, "See you at the meeting on Thursday afternoon in the office.", "rejected"),
    }
    overridden(reviews["driver"], "rejected", moderator, "harassment")
    overridden(reviews["film"], "approved", moderator)
    overridden(reviews["dinner"], "approved", moderator)  # a moderator confirms the provider's approval
    overridden(reviews["threat"], "rejected", moderator, "violence")
    return reviews


@pytest.mark.django_db
class TestTheSummary:
    def test_n_of_m_verdicts_change_with_the_breakdown(self, decided_reviews):
        rows = policy_dry_run(draft=draft_with(MUPPET), active=services.policy_active(), last=500)
        summary = dry_run_summary(rows)
        assert (summary.changed, summary.judged) == (3, 6)
        assert summary.changes == (("manual_review", "rejected", 2), ("approved", "rejected", 1))

    def test_agreement_with_moderators_before_and_after_and_the_disagreements(self, decided_reviews):
        rows = policy_dry_run(draft=draft_with(MUPPET), active=services.policy_active(), last=500)
        summary = dry_run_summary(rows)
        # Moderators decided driver (rejected), film (approved), dinner (approved), threat (rejected).
        assert summary.decided_by_moderators == 4
        assert (summary.draft_agrees, summary.active_agrees) == (2, 1)  # driver and dinner; dinner only
        assert [(row.review_id, row.moderator, row.draft.label) for row in summary.disagreements] == [
            (decided_reviews["threat"].pk, "rejected", "manual_review"),
            (decided_reviews["film"].pk, "approved", "rejected"),
        ]

    def test_an_escalation_and_a_provider_decision_are_not_moderators_judgements(self, api_client, moderator):
        review, _ = services.review_submit(client=api_client, external_id="x1", kind="text",
                                           text="Honestly you are a total muppet and everyone here knows it.")
        services.review_escalate(review_id=review.pk, reason="a human should look", moderator=moderator)
        provider_decided(api_client, "What a muppet that driver was on the road to work today.", "manual_review")
        summary = dry_run_summary(policy_dry_run(draft=draft_with(MUPPET), active=services.policy_active(), last=10))
        # The escalated review has no provider decision: it has no stored scores to re-judge.
        assert (summary.judged, summary.decided_by_moderators, summary.disagreements) == (1, 0, ())

    def test_a_reprocessed_review_is_re_judged_once_by_its_newest_provider_decision(self, api_client):
        review = provider_decided(api_client, "Honestly you are a total muppet and everyone here knows it.", "approved")
        services.review_reprocess(review_id=review.pk, reason="new model", actor="admin", actor_id="sup")
        request = services.review_claim(review_id=review.pk, worker_id="worker-2")
        services.review_finalize(idempotency_key=request.idempotency_key, result=result(0.95), cause="provider_result")
        [row] = policy_dry_run(draft=draft_with(MUPPET), active=services.policy_active(), last=10)
        assert (row.review_id, row.active.label) == (review.pk, "rejected")

    def test_the_page_shows_the_figures_and_the_disagreements(self, staff, decided_reviews):
        page = staff.post(TERMS_URL, form(preview="1", category="harassment", language="", terms="muppet",
                                          dry_last="500", dry_texts="what a muppet\nhello there"))
        html = page.content.decode()
        assert "<strong>3 of 6 verdicts change</strong>" in html
        assert "<li>manual_review → rejected: 2</li>" in html and "<li>approved → rejected: 1</li>" in html
        assert "<strong>Agrees with moderators on 2 of 4</strong> (before: 1 of 4)" in html
        disagreements = html[html.index('id="disagreements"'):html.index("</table>", html.index('id="disagreements"'))]
        assert f"{decided_reviews['film'].pk}/timeline/" in disagreements
        assert f"{decided_reviews['threat'].pk}/timeline/" in disagreements
        assert f"{decided_reviews['driver'].pk}/timeline/" not in disagreements
        assert "Pasted texts: 1 of 2 verdicts change" in html

    def test_the_summary_is_read_in_a_bounded_number_of_queries(self, staff, decided_reviews,
                                                                 django_assert_max_num_queries):
        with django_assert_max_num_queries(12):
            staff.post(TERMS_URL, form(preview="1", category="harassment", language="", terms="muppet",
                                       dry_last="500"))


@pytest.mark.django_db
@FEW
@given(terms=WEIRD, text=WEIRD)
@example(terms="\u202eesrever", text="you id\u200biot \u202eesrever")
@example(terms="re:(", text="🤬🤬🤬")
def test_any_terms_and_texts_preview_with_no_error_and_no_raw_bidi_control(staff, detector_loaded, terms, text):
    page = staff.post(TERMS_URL, form(preview="1", language="", terms=terms, dry_texts=text))
    assert page.status_code == 200
    # What was typed stays in its text boxes as typed; everywhere else a control is a marker.
    shown = re.sub(r"<textarea[^>]*>.*?</textarea>", "", page.content.decode(), flags=re.S)
    assert re.search("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]", shown) is None
    assert ModerationPolicy.objects.count() == 1
