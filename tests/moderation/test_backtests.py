"""Drafts act on nothing until activated in one guarded step; a backtest replays a draft over what
moderators decided with evaluate_policy's figures, writes nothing to reviews, asks the provider
once per text and model, and runs as a resumable, cancellable job (docs/quality.md)."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from audit.models import ReviewTransition
from moderation import services, tasks
from moderation.errors import DraftStale, PolicyChanged
from moderation.models import (
    Backtest,
    BacktestItem,
    BacktestStatus,
    Decision,
    DecisionNotification,
    ModerationPolicy,
    ProviderAnswer,
    ReviewStatus,
    TransparencyStatement,
)
from moderation.quality import backtests
from tests.helpers import collide, count_model_calls, decided, queued_tasks, reads_wait_for_each_other, submit

pytestmark = pytest.mark.django_db

# Texts the local model judges far apart: (text, what a moderator decided of it, category).
HUMAN = [
    ("you are a worthless idiot and everyone hates you", ReviewStatus.REJECTED, "insult"),
    ("I will kill you and your whole family tonight", ReviewStatus.REJECTED, "threat"),
    ("dasar goblok tolol kamu anjing", ReviewStatus.REJECTED, "insult"),
    ("Thanks for the help yesterday, see you at the market", ReviewStatus.APPROVED, ""),
    ("Terima kasih atas bantuannya kemarin", ReviewStatus.APPROVED, ""),
    ("The classic Scunthorpe story, by Dickens", ReviewStatus.APPROVED, ""),
    ("what a stupid idea, honestly", ReviewStatus.APPROVED, ""),
]


# A draft that rejects nothing by itself and asks a human from a score of 0.015: the rejections
# now wait for a human, and so does a mild approval ("what a stupid idea", hate 0.03).
TIMID = {name: {"review": 0.015, "reject": 0.99} for name in ("insult", "threat", "hate", "sexual", "profanity")}


@pytest.fixture
def moderator(django_user_model):
    return django_user_model.objects.create_user("mod-1", password="pw-long-enough-1", is_staff=True)


@pytest.fixture
def human_decided(api_client, moderator, local):
    """HUMAN's texts, each decided by the local model, then by a moderator (the decision in force)."""
    reviews = []
    for text, label, category in HUMAN:
        review = submit(api_client, text=text)
        services.review_claim(review_id=review.pk, worker_id="w")
        services.request_dispatch(request_id=review.requests.get().pk, worker_id="w", job_id="j")
        review.refresh_from_db()
        if review.status != label or review.decision.source != "moderator":
            services.review_override(review_id=review.pk, label=label, reason="checked", category=category,
                                     moderator=moderator, expected_version=review.version)
        review.refresh_from_db()
        reviews.append(review)
    return reviews


def draft_of(active=None, **changes):
    active = active or services.policy_active()
    return services.policy_publish(**{**services.policy_fields(active), **changes}, notes="a draft", draft=True)


# --- drafts --------------------------------------------------------------------------------------

def test_a_draft_acts_on_nothing_and_the_active_version_stays(api_client, local):
    active = services.policy_active()
    draft = draft_of(reject_threshold=0.0, review_threshold=0.0, category_thresholds={})

    review = decided(api_client, ReviewStatus.APPROVED)

    assert draft.is_draft and draft.version == active.version + 1 and draft.drafted_from == active.version
    assert services.policy_active() == active
    assert review.decision.policy_id == active.pk


def test_a_version_published_after_a_draft_takes_the_next_number_and_becomes_active():
    active = services.policy_active()
    draft = draft_of()
    published = services.policy_publish(**services.policy_fields(active), based_on=active.version)

    assert published.version == draft.version + 1 and services.policy_active() == published
    with pytest.raises(DraftStale, match="published since"):
        services.policy_activate(version=draft.version, user=None)
    assert ModerationPolicy.objects.get(pk=draft.pk).is_draft


def test_based_on_compares_with_the_active_version_not_a_draft():
    active = services.policy_active()
    draft_of()
    with pytest.raises(PolicyChanged):
        services.policy_publish(**services.policy_fields(active), based_on=active.version + 1)
    assert services.policy_publish(**services.policy_fields(active), based_on=active.version).version == active.version + 2


def test_activating_a_draft_makes_it_active_once_and_records_who(moderator):
    active = services.policy_active()
    draft = draft_of(reject_threshold=0.85)

    activated = services.policy_activate(version=draft.version, user=moderator, expected_active=active.version)

    assert services.policy_active() == activated and not activated.is_draft
    assert activated.activated_by == moderator and activated.activated_at is not None
    assert activated.history.first().history_user == moderator
    with pytest.raises(DraftStale, match="not a draft"):
        services.policy_activate(version=draft.version, user=moderator)


def test_activation_is_refused_when_the_figures_were_compared_with_another_version(moderator):
    active = services.policy_active()
    draft = draft_of()
    with pytest.raises(DraftStale, match="compare the figures again"):
        services.policy_activate(version=draft.version, user=moderator, expected_active=active.version - 1)
    assert ModerationPolicy.objects.get(pk=draft.pk).is_draft


@pytest.mark.django_db(transaction=True)
def test_two_drafts_of_one_version_activated_at_once_one_wins(monkeypatch, moderator):
    """The guard: the publishing lock. Without it both read the same active version, both pass the
    staleness check, and two drafts of one version are activated."""
    drafts = [draft_of(reject_threshold=0.8), draft_of(reject_threshold=0.7)]
    reads_wait_for_each_other(monkeypatch, ModerationPolicy, 2)

    results = collide(2, lambda i: services.policy_activate(version=drafts[i].version, user=moderator),
                      expect=DraftStale)

    assert sorted(type(r).__name__ for r in results) == ["DraftStale", "ModerationPolicy"]
    assert ModerationPolicy.objects.filter(is_draft=False, drafted_from__isnull=False).count() == 1


# --- backtests -----------------------------------------------------------------------------------

def run_to_end(backtest: Backtest) -> Backtest:
    for _ in range(50):
        backtests.backtest_run(backtest_id=backtest.pk, deadline=time.monotonic() + 5, enqueue_rest=False)
        backtest.refresh_from_db()
        if backtest.status not in (BacktestStatus.QUEUED, BacktestStatus.RUNNING):
            return backtest
    raise AssertionError("the backtest never ended")


def written_state():
    return (list(Decision.objects.order_by("pk").values_list("pk", "label")),
            list(ReviewTransition.objects.order_by("pk").values_list("pk", flat=True)),
            DecisionNotification.objects.count(), TransparencyStatement.objects.count())


def test_a_backtest_measures_what_moderators_decided_and_writes_nothing_to_reviews(human_decided, local):
    active = services.policy_active()
    draft = draft_of(category_thresholds=TIMID)
    before = written_state()
    versions = {r.pk: r.version for r in human_decided}

    backtest = run_to_end(backtests.backtest_start(candidate=draft, provider_name="local", enqueue=False))

    assert backtest.status == BacktestStatus.DONE and backtest.total == backtest.judged == len(HUMAN)
    every = backtest.figures["slices"][0]
    assert every["by"] == "all" and every["texts"] == len(HUMAN) and every["labelled_1"] == 3
    assert backtest.baseline == active and backtest.baseline_figures["policy_version"] == active.version
    assert backtest.changed == len(backtest.changes) >= 1
    for change in backtest.changes:
        assert change["baseline"] != change["candidate"]
        assert change["review"] in {str(r.pk) for r in human_decided}
    assert written_state() == before
    assert {r.pk: r.version for r in type(human_decided[0]).objects.filter(pk__in=versions)} == versions


def test_a_backtests_figures_equal_evaluate_policys_on_the_same_examples(human_decided, local, tmp_path):
    draft = draft_of(reject_threshold=0.8)
    backtest = run_to_end(backtests.backtest_start(candidate=draft, provider_name="local", enqueue=False))
    labelled = tmp_path / "decided.jsonl"
    items = BacktestItem.objects.filter(backtest=backtest).order_by("position").select_related("review__content")
    labelled.write_text("".join(json.dumps({"text": item.review.content.text, "label": int(item.label),
                                            "language": item.language, "category": item.category}) + "\n"
                                for item in items), encoding="utf-8")

    for version, figures in ((draft.version, backtest.figures), (backtest.baseline.version, backtest.baseline_figures)):
        out = tmp_path / f"v{version}.json"
        call_command("evaluate_policy", "--data", str(labelled), "--policy", str(version), "--provider", "local",
                     "--json", str(out), stdout=StringIO())
        assert json.loads(out.read_text())["slices"] == figures["slices"], version


def test_a_second_backtest_asks_the_provider_nothing_it_was_asked_before(human_decided, local, monkeypatch):
    draft = draft_of(reject_threshold=0.8)
    calls = count_model_calls(monkeypatch)
    first = run_to_end(backtests.backtest_start(candidate=draft, provider_name="local", enqueue=False))
    asked = sum(len(call) for call in calls)
    second = run_to_end(backtests.backtest_start(candidate=draft, provider_name="local", enqueue=False))

    assert asked >= len(HUMAN) and sum(len(call) for call in calls) == asked
    assert first.cached == 0 and second.cached == len(HUMAN)
    assert second.figures == first.figures and ProviderAnswer.objects.count() == len(HUMAN)


def test_since_and_limit_choose_the_decisions(human_decided, local):
    draft = draft_of()
    assert backtests.backtest_start(candidate=draft, limit=2, enqueue=False).total == 2
    future = timezone.now() + timedelta(days=1)
    assert backtests.backtest_start(candidate=draft, since=future, enqueue=False).total == 0


def test_a_backtest_runs_as_a_job_slice_by_slice_and_can_be_cancelled(human_decided, local, moderator,
                                                                     on_commit_callbacks_run, monkeypatch):
    monkeypatch.setattr("moderation.quality.backtests.CHUNK", 2)
    backtest = backtests.backtest_start(candidate=draft_of(), user=moderator)
    [job] = queued_tasks("moderation.tasks.backtest_run")
    assert job["kwargs"]["backtest_id"] == backtest.pk

    # A slice with no time left judges nothing and hands the rest on.
    assert "next slice" in backtests.backtest_run(backtest_id=backtest.pk, deadline=time.monotonic() - 1)
    backtests.backtest_run(backtest_id=backtest.pk, deadline=time.monotonic() + 5, enqueue_rest=False)
    backtest.refresh_from_db()
    assert backtest.status == BacktestStatus.DONE and backtest.percent == 100

    other = backtests.backtest_start(candidate=draft_of(), user=moderator, enqueue=False)
    backtests.backtest_cancel(backtest_id=other.pk, user=moderator)
    assert tasks.backtest_run(other.pk).startswith("cancelled")
    other.refresh_from_db()
    assert other.status == BacktestStatus.CANCELLED and other.judged == 0


def test_a_backtest_whose_worker_died_is_enqueued_again_and_resumes(human_decided, local, on_commit_callbacks_run,
                                                                    monkeypatch):
    monkeypatch.setattr("moderation.quality.backtests.CHUNK", 3)
    backtest = backtests.backtest_start(candidate=draft_of(), enqueue=False)
    backtests.backtest_run(backtest_id=backtest.pk, deadline=time.monotonic() + 5, enqueue_rest=False)
    Backtest.objects.filter(pk=backtest.pk).update(status=BacktestStatus.RUNNING,
                                                   beat_at=timezone.now() - timedelta(hours=1))
    judged_before = Backtest.objects.get(pk=backtest.pk).judged

    assert backtests.backtests_resume() == [backtest.pk]
    assert [t["kwargs"]["backtest_id"] for t in queued_tasks("moderation.tasks.backtest_run")] == [backtest.pk]
    tasks.backtest_run(backtest.pk)
    backtest.refresh_from_db()
    assert backtest.status == BacktestStatus.DONE and backtest.judged == len(HUMAN) and judged_before <= len(HUMAN)


def test_no_transaction_is_held_while_a_chunk_is_judged_and_a_dead_workers_lease_is_taken_over(
        human_decided, local, monkeypatch):
    """docs/design.md, invariant 6: a backtest's provider judges a chunk with no transaction open,
    under a lease on the chunk's items; the items a dead worker leased wait until the lease runs
    out, and the next worker judges them (a chunk that outlives its lease writes nothing)."""
    import uuid

    from moderation.db.transactions import in_transaction
    from moderation.models import BacktestItem
    from moderation.quality import replay

    monkeypatch.setattr("moderation.quality.backtests.CHUNK", 2)
    backtest = backtests.backtest_start(candidate=draft_of(), enqueue=False)
    dead = list(BacktestItem.objects.filter(backtest=backtest).order_by("position").values_list("pk", flat=True)[:2])
    BacktestItem.objects.filter(pk__in=dead).update(lease=uuid.uuid4(), leased_until=timezone.now() + timedelta(minutes=5))
    open_while_judging, real_kept = [], replay.kept_answers
    monkeypatch.setattr(replay, "kept_answers",
                        lambda *a, **kw: (open_while_judging.append(in_transaction()), real_kept(*a, **kw))[1])

    answer = backtests.backtest_run(backtest_id=backtest.pk, deadline=time.monotonic() + 10, enqueue_rest=False)

    assert answer == "the rest is being judged by another worker"
    assert set(BacktestItem.objects.filter(backtest=backtest, done=False).values_list("pk", flat=True)) == set(dead)
    BacktestItem.objects.filter(pk__in=dead).update(leased_until=timezone.now() - timedelta(seconds=1))
    backtests.backtest_run(backtest_id=backtest.pk, deadline=time.monotonic() + 10, enqueue_rest=False)
    backtest.refresh_from_db()
    assert backtest.status == BacktestStatus.DONE and backtest.judged == len(HUMAN)
    assert open_while_judging and not any(open_while_judging)
    assert not BacktestItem.objects.filter(backtest=backtest, lease__isnull=False).exists()


def test_a_provider_that_answers_by_callback_cannot_backtest(settings):
    with pytest.raises(backtests.EvaluationError, match="callback"):
        backtests.backtest_start(candidate=draft_of(), provider_name="webhook", enqueue=False)
    assert not Backtest.objects.exists()


# --- the command ---------------------------------------------------------------------------------

def test_the_command_prints_both_versions_the_changes_and_a_last_line(human_decided, local, tmp_path):
    active = services.policy_active()
    draft = draft_of(category_thresholds=TIMID)
    out = StringIO()
    call_command("backtest_policy", "--candidate", str(draft.version), "--json", str(tmp_path / "b.json"), stdout=out)

    lines = out.getvalue().splitlines()
    assert lines[-1].startswith(f"backtest_policy: {len(HUMAN)} examples, not-approved precision ")
    assert "decisions changed" in lines[-1]
    assert any(line.startswith("all ") for line in lines)
    assert any("/admin/moderation/contentreview/" in line and "-> candidate" in line for line in lines)
    document = json.loads((tmp_path / "b.json").read_text())
    assert document["candidate"] == draft.version and document["baseline"] == active.version


def test_the_command_refuses_what_it_cannot_do(tmp_path):
    with pytest.raises(CommandError, match="no policy version 99"):
        call_command("backtest_policy", "--candidate", "99")
    version = str(services.policy_active().version)
    with pytest.raises(CommandError, match="not a date"):
        call_command("backtest_policy", "--candidate", version, "--since", "yesterday")
    with pytest.raises(CommandError, match="do not apply"):
        call_command("backtest_policy", "--candidate", version, "--since", "2026-01-01", "--data", "x.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("text\nhello\n", encoding="utf-8")
    with pytest.raises(CommandError, match="has no 'label' column"):
        call_command("backtest_policy", "--candidate", version, "--data", str(bad), "--provider", "local")
    with pytest.raises(CommandError, match="answers by callback"):
        call_command("backtest_policy", "--candidate", version, "--provider", "webhook")
    assert not Backtest.objects.exists()


def test_the_command_backtests_a_labelled_file(local, tmp_path):
    data = tmp_path / "labelled.csv"
    data.write_text("text,label\nyou are a worthless idiot,1\nhave a lovely day,0\n", encoding="utf-8")
    out = StringIO()
    call_command("backtest_policy", "--candidate", str(draft_of().version), "--data", str(data), stdout=out)
    assert out.getvalue().splitlines()[-1].startswith("backtest_policy: 2 examples")


def test_erasing_a_content_deletes_the_provider_answers_kept_about_its_text(human_decided, local):
    """A kept answer may quote the text (an llm provider's rationale): erasure takes it with the
    content, whatever model gave it; the other texts' answers stay."""
    from moderation.privacy.erasure import content_erase

    run_to_end(backtests.backtest_start(candidate=draft_of(), provider_name="local", enqueue=False))
    erased = human_decided[0]
    digest = ProviderAnswer.digest_of(erased.content.text)
    ProviderAnswer.objects.create(key="f" * 64, model="llm:other-model", text_digest=digest,
                                  result={"rationale": {"text": "quoting it"}})
    assert ProviderAnswer.objects.filter(text_digest=digest).count() == 2

    content_erase(review_id=erased.pk, actor="admin", actor_id="mia", reason="the author asked")

    assert not ProviderAnswer.objects.filter(text_digest=digest).exists()
    assert ProviderAnswer.objects.count() == len(HUMAN) - 1
