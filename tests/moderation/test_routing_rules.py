"""Routing rules, pure: each condition matches what it lists and nothing else, the first matching
rule wins, no match keeps the cause's queue, and the one validator refuses bad rules with a
clear error (docs/workplace.md, "Routing rules and queue access")."""

from __future__ import annotations

import pytest
from django.utils import timezone
from hypothesis import given, settings as hypothesis_settings, strategies as st

from moderation.models import Cause, ModerationPolicy, ReviewQueue
from moderation.review_queues import (
    LIST_CONDITIONS,
    RouteFacts,
    queue_entry,
    route,
    rule_matches,
    routing_conditions_used,
    top_category,
    validate_routing_rules,
)
from moderation.validation import validate_policy
from tests.helpers import examples

INDONESIAN = RouteFacts(language="id", client="acme", report_kind="user", author_standing="warned", media_kind="text")
# For each condition: a value the review above has, and one it does not.
CONDITIONS = [
    ("language", ["id"], ["en", "ms"]),
    ("client", ["acme"], ["globex"]),
    ("report_kind", ["user"], ["dsa_notice", "trusted_flagger"]),
    ("author_standing", ["warned"], ["good", "banned"]),
    ("media_kind", ["text"], ["image", "audio"]),
    ("cause", ["user_reports"], ["appeal", "provider_result"]),
    ("category", ["hate"], ["spam"]),
]
SCORES = {"hate": 0.72, "spam": 0.3, "violence": 0.1}


def policy(rules: list) -> ModerationPolicy:
    return ModerationPolicy(priority_score_weight=100, priority_report_weight=15, priority_appeal_weight=40,
                            priority_age_points_per_hour=10, routing_rules=rules)


def matches(when: dict, *, cause=Cause.USER_REPORTS, scores=SCORES, facts=INDONESIAN) -> bool:
    return rule_matches(when, cause=cause, category_scores=scores, facts=facts)


@pytest.mark.parametrize(("name", "listed", "unlisted"), CONDITIONS, ids=[c[0] for c in CONDITIONS])
def test_each_list_condition_matches_a_listed_value_and_not_another(name, listed, unlisted):
    assert matches({name: listed})
    assert matches({name: [*unlisted, *listed]})  # any of them
    assert not matches({name: unlisted})


def test_every_list_condition_is_covered_above():
    assert {c[0] for c in CONDITIONS} == set(LIST_CONDITIONS)


@pytest.mark.parametrize(("when", "expected"), [
    ({"score_gte": 0.72}, True), ({"score_gte": 0.73}, False),
    ({"score_lte": 0.72}, True), ({"score_lte": 0.71}, False),
    ({"score_gte": 0.5, "score_lte": 0.8}, True), ({"score_gte": 0.8, "score_lte": 0.9}, False),
    ({"category": ["hate"], "score_gte": 0.7}, True), ({"category": ["hate"], "score_gte": 0.9}, False),
])
def test_score_bounds_are_inclusive_and_apply_to_the_top_categorys_score(when, expected):
    assert matches(when) is expected


def test_every_condition_of_a_rule_must_hold():
    assert matches({"language": ["id"], "report_kind": ["user"], "score_gte": 0.5})
    assert not matches({"language": ["id"], "report_kind": ["dsa_notice"]})


def test_an_unknown_fact_matches_no_listed_value():
    unknown = RouteFacts()
    for name, listed, _ in CONDITIONS[:5]:
        assert not matches({name: listed}, facts=unknown)
    assert not matches({"category": ["hate"]}, scores={})  # no scores: no top category
    assert matches({"score_lte": 0.0}, scores={}) and not matches({"score_gte": 0.01}, scores={})


def test_the_top_category_is_the_highest_score_ties_by_name():
    assert top_category({"b": 0.5, "a": 0.5, "c": 0.1}) == ("a", 0.5)
    assert top_category({}) == ("", 0.0) and top_category(None) == ("", 0.0)
    assert top_category({"x": None, "y": 0.2}) == ("y", 0.2)


def test_the_first_matching_rule_wins():
    rules = [
        {"name": "banned authors", "queue": "banned", "when": {"author_standing": ["banned"]}},
        {"name": "indonesian", "queue": "reports-id", "when": {"language": ["id"]}},
        {"name": "hate", "queue": "hate", "when": {"category": ["hate"]}},
    ]
    assert route(rules, cause=Cause.USER_REPORTS, category_scores=SCORES, facts=INDONESIAN) == "reports-id"
    assert route(rules[::-1], cause=Cause.USER_REPORTS, category_scores=SCORES, facts=INDONESIAN) == "hate"


def test_no_match_keeps_the_causes_queue_and_the_priority():
    rules = [{"name": "malay", "queue": "reports-ms", "when": {"language": ["ms"]}}]
    now = timezone.now()
    routed = queue_entry(policy(rules), cause=Cause.USER_REPORTS, category_scores=SCORES, report_count=3, now=now,
                         facts=INDONESIAN)
    plain = queue_entry(policy([]), cause=Cause.USER_REPORTS, category_scores=SCORES, report_count=3, now=now)
    assert routed == plain and routed.queue == ReviewQueue.REPORTS


def test_a_matching_rule_sends_the_review_to_its_queue_with_the_same_priority():
    rules = [{"name": "indonesian reports", "queue": "reports-id",
              "when": {"language": ["id"], "report_kind": ["user"]}}]
    now = timezone.now()
    routed = queue_entry(policy(rules), cause=Cause.USER_REPORTS, category_scores=SCORES, report_count=3, now=now,
                         facts=INDONESIAN)
    plain = queue_entry(policy([]), cause=Cause.USER_REPORTS, category_scores=SCORES, report_count=3, now=now)
    assert routed.queue == "reports-id"
    assert (routed.priority, routed.order_at) == (plain.priority, plain.order_at)


def test_rules_also_route_what_a_built_in_rule_would_have_sent_elsewhere():
    # A notice would wait in "DSA notices"; a rule placed first decides before that default.
    rules = [{"name": "id notices", "queue": "notices-id", "when": {"language": ["id"]}}]
    entry = queue_entry(policy(rules), cause=Cause.NOTICE, category_scores={}, notice_kind="dsa_notice",
                        now=timezone.now(), facts=INDONESIAN)
    assert entry.queue == "notices-id"
    assert queue_entry(policy([]), cause=Cause.NOTICE, category_scores={}, notice_kind="dsa_notice",
                       now=timezone.now()).queue == ReviewQueue.NOTICES


def test_the_conditions_used_are_what_the_caller_must_read():
    rules = [{"name": "a", "queue": "q", "when": {"client": ["acme"]}},
             {"name": "b", "queue": "q", "when": {"language": ["id"], "score_gte": 0.2}}]
    assert routing_conditions_used(rules) == {"client", "language", "score_gte"}
    assert routing_conditions_used([]) == set()


# --- validation -----------------------------------------------------------------------------

GOOD = {"name": "indonesian reports", "queue": "reports-id", "when": {"language": ["id"], "report_kind": ["user"]}}
KNOWN = {"languages": ("en", "id", "ms"), "categories": ["hate", "spam"], "queues": {"reports-id", "reports"}}


def test_a_good_rule_set_has_no_error():
    assert validate_routing_rules([GOOD], **KNOWN) == []
    assert validate_routing_rules([], **KNOWN) == []


@pytest.mark.parametrize(("rules", "error"), [
    ({"name": "x"}, "must be a list"),
    ([GOOD] * 101, "at most 100"),
    (["a rule"], 'exactly "name", "queue" and "when"'),
    ([{**GOOD, "extra": 1}], 'exactly "name", "queue" and "when"'),
    ([{**GOOD, "name": " "}], "the name is a text"),
    ([GOOD, {**GOOD, "queue": "reports"}], "used twice"),
    ([{**GOOD, "queue": "Reports ID"}], "a queue slug"),
    ([{**GOOD, "queue": "x" * 25}], "a queue slug"),
    ([{**GOOD, "queue": "vip"}], "there is no queue 'vip'"),
    ([{**GOOD, "when": {}}], "one condition or more"),
    ([{**GOOD, "when": []}], "one condition or more"),
    ([{**GOOD, "when": {"lang": ["id"]}}], "unknown condition 'lang'"),
    ([{**GOOD, "when": {"language": "id"}}], "language is a list"),
    ([{**GOOD, "when": {"language": []}}], "language is a list"),
    ([{**GOOD, "when": {"language": ["xx"]}}], "language 'xx' unknown (one of en, id, ms)"),
    ([{**GOOD, "when": {"category": ["violence"]}}], "category 'violence' unknown"),
    ([{**GOOD, "when": {"category": ["Hate Speech"]}}], "category 'Hate Speech' unknown"),
    ([{**GOOD, "when": {"report_kind": ["users"]}}], "report_kind 'users' unknown"),
    ([{**GOOD, "when": {"author_standing": ["evil"]}}], "author_standing 'evil' unknown"),
    ([{**GOOD, "when": {"media_kind": ["video"]}}], "media_kind 'video' unknown"),
    ([{**GOOD, "when": {"cause": ["whim"]}}], "cause 'whim' unknown"),
    ([{**GOOD, "when": {"score_gte": 1.5}}], "score_gte is a number from 0 to 1"),
    ([{**GOOD, "when": {"score_lte": True}}], "score_lte is a number from 0 to 1"),
    ([{**GOOD, "when": {"score_gte": 0.8, "score_lte": 0.2}}], "no score matches"),
    ([{**GOOD, "when": {"client": [""]}}], "client is a list of 1 to 100 non-empty texts"),
])
def test_bad_rules_are_refused_with_a_clear_error(rules, error):
    errors = validate_routing_rules(rules, **KNOWN)
    assert any(error in e for e in errors), errors


def test_the_policy_validator_reports_rule_errors_with_the_others():
    fields = {"reject_threshold": 0.4, "review_threshold": 0.5, "routing_rules": [{**GOOD, "queue": "vip"}]}
    errors = validate_policy(fields, queues={"reports"})
    assert any("thresholds must satisfy" in e for e in errors)
    assert any("there is no queue 'vip'" in e for e in errors)
    # Categories of the version's own fields count: a threshold's category may be routed on.
    ok = {"reject_threshold": 0.9, "review_threshold": 0.5, "category_thresholds": {"fraud": {"review": 0.3}},
          "routing_rules": [{**GOOD, "when": {"category": ["fraud"]}}]}
    assert validate_policy(ok, queues={"reports-id"}) == []


json_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=True) | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@hypothesis_settings(max_examples=examples(300), deadline=None)
@given(rules=st.one_of(json_values, st.lists(st.fixed_dictionaries(
    {"name": st.text(), "queue": st.text(max_size=30),
     "when": st.dictionaries(st.sampled_from([*LIST_CONDITIONS, "score_gte", "score_lte", "other"]), json_values,
                             max_size=4)}), max_size=4)))
def test_any_json_gets_errors_never_an_exception(rules):
    errors = validate_routing_rules(rules, **KNOWN)
    assert isinstance(errors, list) and all(isinstance(e, str) and e for e in errors)


@hypothesis_settings(max_examples=examples(300), deadline=None)
@given(value=st.text(), listed=st.lists(st.text(min_size=1), min_size=1, max_size=4),
       name=st.sampled_from(["language", "client", "report_kind", "author_standing", "media_kind"]))
def test_a_rule_matches_arbitrary_unicode_exactly_when_the_value_is_listed(value, listed, name):
    facts = RouteFacts(**{name: value})
    assert matches({name: listed}, facts=facts) is (value in listed)
    rule = {"name": "r", "queue": "q", "when": {name: listed}}
    errors = validate_routing_rules([rule], languages=None, categories=None, queues=None)
    assert isinstance(errors, list)
