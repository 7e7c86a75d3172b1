"""Long texts judged by parts: the local model scores a text's sentences beside the whole, in one
call, and the policy's `part_rule` decides how they count (docs/workplace.md, "Long texts")."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from audit.models import Actor
from moderation import services, tasks
from moderation.privacy.erasure import content_erase
from moderation.models import ContentReview, ModerationPolicy, PartRule, ReviewStatus
from moderation.providers import ModerationInput, ModerationResult, PartScore, get_provider
from moderation.services.policy import DEFAULT_POLICY
from moderation.verdicts import MAX_STORED_PARTS, evaluate, judged_scores, parts_record
from tests.helpers import count_model_calls, submit
from tests.moderation import test_admin

GARDEN = ("Our community garden meets every Saturday morning near the old library. We share seeds, tools and "
          "advice about compost, and the children water the tomatoes while the adults fix the fence. ")
INSULT = "Honestly the new treasurer is a fucking idiot and a worthless piece of shit."
# The example: some five kilobytes of kind words with one insult in their middle.
LONG = GARDEN * 14 + INSULT + " " + GARDEN * 14


def moderate(**fields) -> ModerationResult:
    return get_provider("local").moderate(ModerationInput(idempotency_key="k", **fields))


def policy(rule: str, **fields) -> ModerationPolicy:
    return ModerationPolicy(version=1, part_rule=rule, **{**DEFAULT_POLICY, **fields})


def scored(whole: float, *parts: float) -> ModerationResult:
    return ModerationResult(model="m", flagged=False, categories={"insult": False}, category_scores={"insult": whole},
                            parts=tuple(PartScore(10 * i, 10 * i + 5, {"insult": s}) for i, s in enumerate(parts)))


def test_the_whole_of_the_long_example_is_diluted_but_its_insult_is_not():
    result = moderate(content_type="text", text=LONG)
    assert len(LONG) > 5000 and result.category_scores["insult"] < 0.05 and result.flagged is False
    worst = max(result.parts, key=lambda p: p.scores["insult"])
    assert LONG[worst.start:worst.end] == INSULT and worst.scores["insult"] > 0.9


def test_the_whole_text_and_every_part_are_scored_in_one_model_call(monkeypatch):
    calls = count_model_calls(monkeypatch)
    provider = get_provider("local")
    answers = provider.moderate_many([ModerationInput(idempotency_key="a", content_type="text", text=LONG),
                                      ModerationInput(idempotency_key="b", content_type="text", text="hello there")])
    assert len(calls) == 1
    # The model reads the normal form (moderation.text.normal), the parts cut from it; their spans are the original's.
    assert calls[0] == [LONG.lower(), *(LONG[p.start:p.end].lower() for p in answers[0].parts), "hello there"]
    assert answers[1].parts == ()  # one sentence: its whole score is its part's


def test_a_text_of_one_sentence_has_no_parts_and_scores_as_before():
    result = moderate(content_type="text", text="shut up you fucking idiot")
    assert result.parts == () and result.category_scores["insult"] > 0.9


def test_the_parts_of_metadata_lie_in_the_text_the_rules_read():
    metadata = {"title": "Garden news", "body": GARDEN * 3 + INSULT + " " + GARDEN, "tags": ["", "compost"]}
    result = moderate(content_type="metadata", metadata=metadata)
    joined = "\n".join(["Garden news", metadata["body"], "", "compost"])  # moderation.verdicts.rule_text
    worst = max(result.parts, key=lambda p: p.scores["insult"])
    assert joined[worst.start:worst.end] == INSULT


@pytest.mark.parametrize(("rule", "expected"), [
    (PartRule.MAX, 0.9), (PartRule.TOP2_MEAN, 0.6), (PartRule.TOP3_MEAN, 0.5), (PartRule.WHOLE, 0.2),
])
def test_the_policys_part_rule_says_how_the_parts_count(rule, expected):
    assert judged_scores(policy(rule), scored(0.2, 0.1, 0.9, 0.3, 0.3)) == {"insult": pytest.approx(expected)}


@pytest.mark.parametrize("rule", list(PartRule))
def test_no_rule_judges_a_text_below_its_whole_score(rule):
    assert judged_scores(policy(rule), scored(0.7, 0.1, 0.2, 0.1))["insult"] == 0.7


def test_a_result_without_parts_is_judged_by_its_whole_scores_under_every_rule():
    for rule in PartRule:
        assert judged_scores(policy(rule), scored(0.4)) == {"insult": 0.4}


def test_the_explanation_says_the_text_was_judged_by_parts_and_gives_the_whole_score():
    verdict = evaluate(policy(PartRule.MAX), scored(0.01, 0.2, 0.95))
    assert verdict.label == ReviewStatus.REJECTED and verdict.score == 0.95
    reject_at = DEFAULT_POLICY["category_thresholds"]["insult"]["reject"]
    assert verdict.explanation == (f"policy v1: insult=0.950 >= reject {reject_at} (judged by parts, the worst part of 2; "
                                   "the whole text: insult=0.010)")
    assert evaluate(policy(PartRule.WHOLE), scored(0.01, 0.2, 0.95)).label == ReviewStatus.APPROVED


def test_only_the_parts_over_a_threshold_are_kept_with_their_level_and_the_first_fifty():
    levels = DEFAULT_POLICY["category_thresholds"]["insult"]
    between = round((levels["review"] + levels["reject"]) / 2, 3)  # over review, under reject
    record = parts_record(policy(PartRule.MAX), scored(0.1, 0.2, between, 0.95))
    assert record == {"rule": "max", "count": 3, "whole": {"insult": 0.1}, "more": 0, "crossed": [
        {"start": 10, "end": 15, "scores": {"insult": between}, "level": "review"},
        {"start": 20, "end": 25, "scores": {"insult": 0.95}, "level": "reject"}]}
    many = parts_record(policy(PartRule.MAX), scored(0.1, *[0.97] * (MAX_STORED_PARTS + 7)))
    assert len(many["crossed"]) == MAX_STORED_PARTS and many["more"] == 7
    assert parts_record(policy(PartRule.MAX), scored(0.1)) == {}


def the_model_alone(**changes) -> None:
    """Publish a version without the default term lists: what these tests judge is how the model's
    parts count, and the lists would reject the insult by themselves ("fucking" is a default
    reject term, docs/policy-rules.md "Default term lists")."""
    services.policy_publish_change(lambda active: {"term_lists": [], **changes}, notes="the model alone")


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_the_five_kilobyte_example_is_no_longer_approved(api_client, local):
    the_model_alone()
    review = submit(api_client, text=LONG)
    tasks.moderate_review(review.pk)

    review = ContentReview.objects.select_related("decision").get(pk=review.pk)
    decision = review.decision
    assert review.status == ReviewStatus.REJECTED
    assert decision.category_scores["insult"] > 0.9 and decision.score > 0.9
    assert decision.parts["rule"] == "max" and decision.parts["whole"]["insult"] < 0.05
    assert [(LONG[p["start"]:p["end"]], p["level"]) for p in decision.parts["crossed"]] == [(INSULT, "reject")]
    assert "judged by parts" in decision.explanation
    assert INSULT not in str(decision.parts) and "idiot" not in decision.explanation  # offsets, never words


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_under_a_version_whose_rule_is_whole_the_same_text_is_approved_and_keeps_its_evidence(api_client, local):
    the_model_alone(part_rule=PartRule.WHOLE)
    review = submit(api_client, text=LONG)
    tasks.moderate_review(review.pk)

    review = ContentReview.objects.select_related("decision__policy").get(pk=review.pk)
    assert review.status == ReviewStatus.APPROVED and review.decision.policy.part_rule == "whole"
    assert review.decision.category_scores["insult"] < 0.05
    assert len(review.decision.parts["crossed"]) == 1  # still shown to whoever looks at it


@pytest.mark.django_db
def test_the_part_rule_is_versioned_and_validated():
    first = services.policy_active()
    assert first.part_rule == PartRule.MAX
    second = services.policy_publish_change(lambda active: {"part_rule": PartRule.TOP2_MEAN})
    third = services.policy_publish_change(lambda active: {"reject_threshold": 0.95})
    assert (second.part_rule, third.part_rule) == ("top2_mean", "top2_mean")
    assert ModerationPolicy.objects.get(pk=first.pk).part_rule == "max"
    with pytest.raises(ValidationError, match="part_rule must be one of max, top2_mean, top3_mean, whole"):
        services.policy_publish_change(lambda active: {"part_rule": "median"})


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_erasure_clears_where_the_offending_parts_lay(api_client, local):
    review = submit(api_client, text=LONG)
    tasks.moderate_review(review.pk)
    content_erase(review_id=review.pk, actor=Actor.API, actor_id="acme", reason="withdrawn")
    review = ContentReview.objects.select_related("decision").get(pk=review.pk)
    assert review.decision.parts == {} and review.content.text == ""


staff = test_admin.staff  # a fixture: a logged-in superuser's test client
FORM = {"reject_threshold": 0.9, "review_threshold": 0.5, "category_thresholds": "{}", "flagged_label": "manual_review",
        "report_threshold": 3, **test_admin.WORKPLACE_FIELDS}


@pytest.mark.django_db
def test_the_policy_form_publishes_the_part_rule_keeps_the_active_one_when_left_out_and_refuses_others(staff):
    add = "/admin/moderation/moderationpolicy/add/"
    assert staff.post(add, {**FORM, "part_rule": "top2_mean"}).status_code == 302
    assert staff.post(add, FORM).status_code == 302
    refused = staff.post(add, {**FORM, "part_rule": "median"})
    assert refused.status_code == 200 and "median is not one of the available choices" in refused.content.decode()
    assert list(ModerationPolicy.objects.order_by("version").values_list("part_rule", flat=True)) == [
        "max", "top2_mean", "top2_mean"]
