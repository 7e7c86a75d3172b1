from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from moderation import services
from moderation.models import ModerationPolicy
from moderation.providers.local import CATEGORIES
from moderation.verdicts import LEGACY_CATEGORY_NAMES, evaluate, thresholds_for
from tests.helpers import collide


def scores(**categories):
    from moderation.providers import ModerationResult

    return ModerationResult(
        model="m", flagged=False, categories={k: False for k in categories}, category_scores=categories
    )


def policy(**overrides):
    fields = {"version": 1, "reject_threshold": 0.9, "review_threshold": 0.5, "flagged_label": "manual_review"}
    return ModerationPolicy(**{**fields, **overrides})


@pytest.mark.parametrize(
    ("category_scores", "label"),
    [
        ({"hate": 0.1, "violence": 0.2}, "approved"),
        ({"hate": 0.5}, "manual_review"),
        ({"hate": 0.6, "violence": 0.95}, "rejected"),
        ({"hate": 0.95, "violence": 0.6}, "rejected"),
        ({}, "approved"),
    ],
)
def test_the_strictest_category_decides(category_scores, label):
    assert evaluate(policy(), scores(**category_scores)).label == label


def test_category_thresholds_override_the_defaults():
    strict = policy(category_thresholds={"violence": {"reject": 0.3}})
    verdict = evaluate(strict, scores(violence=0.35, hate=0.35))
    assert verdict.label == "rejected"
    assert "violence=0.350 >= reject 0.3" in verdict.explanation
    assert verdict.score == 0.35


def test_a_version_naming_the_models_first_category_names_still_applies_them_to_insult_and_threat():
    # The local model's version 1 called insults `harassment` and threats `violence`; a version
    # published then is never edited (docs/design.md, "Providers"), so its thresholds must hold.
    legacy = policy(category_thresholds={"harassment": {"review": 0.2, "reject": 0.4}, "violence": {"reject": 0.3}})
    assert thresholds_for(legacy, "insult") == (0.2, 0.4) and thresholds_for(legacy, "threat") == (0.5, 0.3)
    verdict = evaluate(legacy, scores(insult=0.45, threat=0.1))
    assert verdict.label == "rejected" and "insult=0.450 >= reject 0.4" in verdict.explanation
    assert evaluate(legacy, scores(insult=0.25)).label == "manual_review"
    assert evaluate(legacy, scores(threat=0.35)).label == "rejected"
    # A provider that scores `harassment` itself (OpenAI's name) is judged by that entry, as before.
    assert thresholds_for(legacy, "harassment") == (0.2, 0.4)


def test_a_categorys_own_entry_wins_over_its_legacy_name_and_never_lends_it_the_other_way():
    both = policy(category_thresholds={"insult": {"review": 0.6, "reject": 0.8}, "harassment": {"review": 0.1, "reject": 0.2}})
    assert thresholds_for(both, "insult") == (0.6, 0.8)
    assert evaluate(both, scores(insult=0.3)).label == "approved"
    only_new = policy(category_thresholds={"insult": {"reject": 0.3}})
    assert thresholds_for(only_new, "harassment") == (0.5, 0.9)  # insult's thresholds are not harassment's
    assert thresholds_for(only_new, "hate") == (0.5, 0.9)
    assert set(LEGACY_CATEGORY_NAMES) <= set(CATEGORIES)


def test_a_flag_below_every_threshold_follows_the_policys_flagged_label():
    from dataclasses import replace

    flagged = replace(scores(hate=0.2), flagged=True)
    assert evaluate(policy(), flagged).label == "manual_review"
    assert evaluate(policy(flagged_label="approved"), flagged).label == "approved"


@pytest.mark.django_db
def test_publishing_creates_a_new_version_and_keeps_the_old_one():
    first = services.policy_active()
    new = services.policy_publish(reject_threshold=0.8, review_threshold=0.4, notes="stricter")

    assert new.version == first.version + 1
    assert services.policy_active() == new
    first.refresh_from_db()
    assert first.reject_threshold == 0.9


@pytest.mark.django_db
@pytest.mark.parametrize(
    "bad",
    [
        {"reject_threshold": 0.4, "review_threshold": 0.5},
        {"reject_threshold": 1.5, "review_threshold": 0.5},
        {"reject_threshold": 0.9, "review_threshold": 0.5, "category_thresholds": {"hate": {"block": 0.1}}},
        {"reject_threshold": 0.9, "review_threshold": 0.5, "category_thresholds": {"hate": {"reject": "high"}}},
        {"reject_threshold": 0.9, "review_threshold": 0.5, "category_thresholds": {"hate": {"review": 0.8, "reject": 0.2}}},
        {"reject_threshold": 0.9, "review_threshold": 0.5, "flagged_label": "pending"},
        {"reject_threshold": 0.9, "review_threshold": 0.5, "report_expiry_days": 0},
        {"reject_threshold": 0.9, "review_threshold": 0.5, "pile_on_reports": 1},
        {"reject_threshold": 0.9, "review_threshold": 0.5, "pile_on_minutes": "ten"},
    ],
)
def test_an_invalid_policy_is_refused_and_nothing_is_published(bad):
    before = ModerationPolicy.objects.count()
    with pytest.raises(ValidationError):
        services.policy_publish(**bad)
    assert ModerationPolicy.objects.count() == before


@pytest.mark.django_db(transaction=True)
def test_concurrent_publishers_get_distinct_consecutive_versions():
    base = services.policy_active().version

    published = collide(5, lambda i: services.policy_publish(reject_threshold=0.9, review_threshold=0.1 * i).version)

    assert sorted(published) == list(range(base + 1, base + 6))
