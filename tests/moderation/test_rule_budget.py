"""Rule matching costs work linear in the matches, and a bounded amount per text: allow rules do
not make it quadratic, and a hostile text past the match budget is judged at least as strictly as
in full (moderation.text.rules.rule_matches, docs/policy-rules.md "Work per text")."""

from __future__ import annotations

import pytest

from moderation import tasks
from moderation.text import rules
from moderation.text.language import Detection
from moderation.models import ModerationPolicy
from moderation.verdicts import decide
from moderation.providers import ModerationResult
from moderation.text.rules import RuleMatch, rule_matches

KILL = {"category": "violence", "action": "reject", "language": "", "terms": ["kill"]}
ALLOW = {"category": "violence", "action": "allow", "language": "", "terms": ["kill the process"]}
LINKS = {"category": "spam", "action": "manual_review", "language": "", "terms": ["re:https?://\\S+"]}
SURE_EN = Detection("en", (("en", 0.9),))
LOW = ModerationResult(model="m", flagged=False, categories={"profanity": False}, category_scores={"profanity": 0.02})


def policy(*term_lists) -> ModerationPolicy:
    return ModerationPolicy(version=1, reject_threshold=0.9, review_threshold=0.5, term_lists=list(term_lists))


def dense(unit: str, chars: int) -> str:
    return (unit * (chars // len(unit) + 1))[:chars]


@pytest.fixture
def span_reads(monkeypatch):
    """Counts every read of a rule match's span: the work of deciding which matches an allow
    match contains (RuleMatch is built by name in moderation.text.rules, so the counting kind is used)."""
    reads = [0]

    class CountingMatch(RuleMatch):
        __slots__ = ()

        @property
        def start(self):
            reads[0] += 1
            return tuple.__getitem__(self, 6)

        @property
        def end(self):
            reads[0] += 1
            return tuple.__getitem__(self, 7)

    monkeypatch.setattr(rules, "RuleMatch", CountingMatch)
    return reads


def test_allow_rules_cost_span_reads_linear_in_the_matches(span_reads):
    text = "please kill the process and kill him " * 540
    found = rule_matches(policy(KILL, ALLOW), text, SURE_EN)

    matches = text.count("kill")  # each "kill", and each "kill the process" around one of them
    assert [m.term for m in found].count("kill") == matches // 2
    assert span_reads[0] <= 20 * matches, f"{span_reads[0]} span reads for {matches} matches"


def test_matches_past_the_budget_still_count_and_no_allow_cancels_them(monkeypatch):
    monkeypatch.setattr(rules, "MATCH_BUDGET", 10, raising=False)
    allowed_only = "kill the process. " * 30
    # In full, every "kill" lies inside an allowed "kill the process": approved. Past the budget the
    # allow exceptions are not examined, so the text is judged as if they were not there.
    verdict = decide(policy(KILL, ALLOW), LOW, text=allowed_only, detection=SURE_EN)
    assert verdict.label == "rejected"
    assert 'rule violence:reject matched term "kill" at ' in verdict.explanation
    assert "more rule matches than the match budget: past it, each term's first match counts" in verdict.explanation
    # A term whose only match lies past the budget still counts.
    late = "kill the process. " * 30 + "http://spam.example"
    assert "spam:manual_review" in {m.rule for m in rule_matches(policy(ALLOW, LINKS), late, SURE_EN)}


def test_within_the_budget_an_allow_match_cancels_what_it_contains():
    verdict = decide(policy(KILL, ALLOW), LOW, text="kill the process. " * 30, detection=SURE_EN)
    assert verdict.label == "approved" and {m.action for m in verdict.rule_matches} == {"allow"}
    assert "match budget" not in verdict.explanation
    assert "past_budget" not in verdict.rule_matches[0].as_json()  # the stored shape of a match is unchanged


def test_the_budget_bounds_the_matches_of_a_text_however_many_there_are():
    text = dense("kill ", 100_000)  # 20,000 matches of one term
    found = rule_matches(policy(KILL, ALLOW, LINKS), text, SURE_EN)
    assert rules.MATCH_BUDGET < len(found) <= rules.MATCH_BUDGET + 3
    assert decide(policy(KILL, ALLOW, LINKS), LOW, text=text, detection=SURE_EN).label == "rejected"


# The provider is never called inside a transaction (invariant 6): this test commits for real.
@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_hostile_allow_dense_texts_from_one_client_do_not_hold_up_another_clients_review(
    settings, api_client, other_client, span_reads
):
    """Reviews are decided one after another by a worker: what one client's texts cost is time
    every other client waits. Work per review is bounded by the match budget, whatever the text."""
    from moderation import services
    from tests.helpers import submit

    settings.MODERATION_PROVIDER = "local"
    services.policy_publish(reject_threshold=0.9, review_threshold=0.5, term_lists=[KILL, ALLOW, LINKS])
    hostile = [submit(api_client, text=dense(f"kill the process {n} kill ", 100_000)) for n in range(2)]
    normal = submit(other_client, text="Thanks for the lovely dinner, see you on Sunday!")

    # One job per review, in submission order, as one worker takes them (with batching on, the
    # first job takes all three: then the normal review waits for the whole batch).
    for review in [*hostile, normal]:
        tasks.moderate_review(review.pk)

    for review in [*hostile, normal]:
        review.refresh_from_db()
    assert [r.status for r in hostile] == ["rejected", "rejected"]
    assert normal.status == "approved"
    # Before the normal review was decided: three matching passes per hostile text, each examining
    # at most MATCH_BUDGET matches in full, a few span reads each.
    assert span_reads[0] <= len(hostile) * 40 * rules.MATCH_BUDGET, span_reads[0]


@pytest.mark.django_db
def test_a_dry_run_over_the_last_reviews_of_allow_dense_texts_costs_work_linear_in_their_matches(
    api_client, span_reads
):
    """The editor's dry run decides each of the last N reviews twice (draft and active): with the
    quadratic allow step, 50 reviews of such texts did not answer within 30 s."""
    from moderation import services
    from moderation.observability.dry_run import policy_dry_run
    from tests.helpers import result, submit

    active = services.policy_publish(reject_threshold=0.9, review_threshold=0.5, term_lists=[KILL, ALLOW])
    text = "please kill the process and kill him " * 540  # 1,620 matches, 540 of them allow matches
    for _ in range(5):
        review = submit(api_client, text=text)
        request = services.review_claim(review_id=review.pk, worker_id="worker-1")
        services.review_finalize(idempotency_key=request.idempotency_key, result=result(0.1), cause="provider_result")
    draft = services.policy_draft(active, term_lists=[KILL, ALLOW, LINKS])
    span_reads[0] = 0

    rows = policy_dry_run(draft=draft, active=active, last=5)

    assert [(row.active.label, row.draft.label) for row in rows] == [("rejected", "rejected")] * 5
    assert span_reads[0] <= 5 * 2 * 20 * 1_620, span_reads[0]


def test_the_policy_rules_doc_states_the_budget_the_code_has():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "policy-rules.md").read_text(encoding="utf-8")
    assert f"`moderation.text.rules.MATCH_BUDGET` ({rules.MATCH_BUDGET:,})" in doc
    assert f"examines its first {rules.MATCH_BUDGET:,} matches in full" in doc
