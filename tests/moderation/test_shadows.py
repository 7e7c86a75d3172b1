"""Shadow runs: a version judges live traffic beside the active one and acts on nothing; a shadow
that raises, hangs or answers garbage changes nothing live; two workers never judge one batch
twice; agreement is counted right (docs/quality.md, "Shadow runs")."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from moderation import services
from moderation.errors import NotApplicable
from moderation.models import Decision, DecisionSource, ModerationPolicy, ReviewStatus, ShadowRun, ShadowVerdict
from moderation.providers import MalformedAnswer, register, unregister
from moderation.quality import shadows
from tests.helpers import collide, count_model_calls, reads_wait_for_each_other, staff_browser, submit
from tests.moderation.test_backtests import TIMID, draft_of

pytestmark = pytest.mark.django_db

TEXTS = ["you are a worthless idiot and everyone hates you", "Thanks for the help yesterday, see you at the market",
         "what a stupid idea, honestly", "Terima kasih atas bantuannya kemarin"]


@pytest.fixture(autouse=True)
def decisions_settle_at_once(settings):
    """A shadow judges a decision once it is QUALITY_SETTLE_S old: here, at once."""
    settings.QUALITY_SETTLE_S = 0


def judged_live(api_client, text: str):
    """A review the live pipeline decided with the local model."""
    review = submit(api_client, text=text)
    services.review_claim(review_id=review.pk, worker_id="w")
    services.request_dispatch(request_id=review.requests.get().pk, worker_id="w", job_id="j")
    review.refresh_from_db()
    assert review.decision.source == DecisionSource.PROVIDER
    return review


def live_state():
    return list(Decision.objects.order_by("pk").values_list("pk", "label", "review__status", "review__version"))


class Broken:
    """A provider that fails as `how` says: raises, answers garbage, or hangs until released."""

    kinds = frozenset({"text"})

    def __init__(self, how: str, release: threading.Event | None = None):
        self.how, self.release, self.entered = how, release, threading.Event()

    def moderate(self, request):
        if self.how == "garbage":
            raise MalformedAnswer("malformed moderation result: 'results' missing")
        if self.how == "hang":
            self.entered.set()
            self.release.wait(30)
            raise MalformedAnswer("timed out")
        raise RuntimeError("the shadow's provider is broken")


@pytest.fixture
def broken():
    made = {}

    def use(how, release=None):
        made[how] = Broken(how, release)
        register(f"broken-{how}", lambda: made[how])
        return f"broken-{how}"

    yield use
    for how in list(made):
        unregister(f"broken-{how}")


def test_a_shadow_judges_each_new_decision_once_and_acts_on_nothing(api_client, local, django_user_model):
    before_start = judged_live(api_client, TEXTS[0])  # decided before the shadow: left to backtests
    draft = draft_of(category_thresholds=TIMID)
    shadow = shadows.shadow_start(policy=draft, provider_name="local", user=None)
    reviews = [judged_live(api_client, text) for text in TEXTS]
    live = live_state()

    assert shadows.shadows_run(deadline=time.monotonic() + 10) == len(TEXTS)
    assert shadows.shadows_run(deadline=time.monotonic() + 10) == 0

    verdicts = {v.review_id: v for v in ShadowVerdict.objects.filter(shadow=shadow)}
    assert set(verdicts) == {r.pk for r in reviews} and before_start.pk not in verdicts
    for review in reviews:
        verdict = verdicts[review.pk]
        assert verdict.live_label == review.decision.label and verdict.decision == review.decision.pk
    # TIMID holds back what the live policy approved: the worthless-idiot text is not rejected.
    assert verdicts[reviews[0].pk].label == ReviewStatus.MANUAL_REVIEW
    assert verdicts[reviews[2].pk].label == ReviewStatus.MANUAL_REVIEW
    assert live_state() == live and services.policy_active() != draft
    shadow.refresh_from_db()
    assert shadow.judged == len(TEXTS) and shadow.errors == 0


@pytest.mark.parametrize("how", ["raise", "garbage"])
def test_a_shadow_whose_provider_raises_or_answers_garbage_changes_nothing_live(api_client, local, broken, how):
    shadow = shadows.shadow_start(policy=services.policy_active(), provider_name=broken(how), user=None)
    reviews = [judged_live(api_client, text) for text in TEXTS]
    live = live_state()

    assert shadows.shadows_run(deadline=time.monotonic() + 10) == len(TEXTS)

    shadow.refresh_from_db()
    assert shadow.errors == len(TEXTS) and shadow.last_error
    assert all(v.error and v.label == ReviewStatus.MANUAL_REVIEW for v in shadow.verdicts.all())
    assert live_state() == live
    # The live pipeline goes on deciding with its own provider.
    assert judged_live(api_client, "have a nice day").decision.source == DecisionSource.PROVIDER
    assert {r.pk for r in reviews} == set(shadow.verdicts.values_list("review_id", flat=True))


@pytest.mark.django_db(transaction=True)
def test_a_hanging_shadow_never_delays_a_live_decision(api_client, settings, broken):
    settings.MODERATION_PROVIDER, settings.MODERATION_BATCH_SIZE = "local", 16
    release = threading.Event()
    name = broken("hang", release)
    shadows.shadow_start(policy=services.policy_active(), provider_name=name, user=None)
    judged_live(api_client, TEXTS[0])
    hanging = threading.Thread(target=lambda: (shadows.shadows_run(deadline=time.monotonic() + 30), connection.close()))
    hanging.start()
    try:
        assert shadows_provider(name).entered.wait(10), "the shadow never called its provider"
        started = time.monotonic()
        review = judged_live(api_client, TEXTS[1])  # while the shadow hangs, holding its row
        assert review.status == ReviewStatus.APPROVED and time.monotonic() - started < 10
    finally:
        release.set()
        hanging.join(30)
    assert ShadowRun.objects.get().errors >= 1


def shadows_provider(name):
    from moderation.providers import get_provider

    return get_provider(name)


@pytest.mark.django_db(transaction=True)
def test_two_workers_never_judge_one_batch_twice(api_client, settings, monkeypatch):
    """The guard: the shadow's row, taken FOR UPDATE SKIP LOCKED. Without it both workers read the
    same cursor and ask the provider for the same texts."""
    settings.MODERATION_PROVIDER, settings.MODERATION_BATCH_SIZE = "local", 16
    shadows.shadow_start(policy=draft_of(category_thresholds=TIMID), provider_name="local", user=None)
    for text in TEXTS:
        judged_live(api_client, text)
    calls = count_model_calls(monkeypatch)
    reads_wait_for_each_other(monkeypatch, ShadowRun, 2)

    collide(2, lambda i: shadows.shadows_run(deadline=time.monotonic() + 10))

    assert sum(len(texts) for texts in calls) == len(TEXTS)
    assert ShadowVerdict.objects.count() == len(TEXTS) and ShadowRun.objects.get().judged == len(TEXTS)


def test_agreement_with_live_and_with_moderators_per_day_and_category(api_client, local, django_user_model):
    moderator = django_user_model.objects.create_user("mod-9", password="pw-long-enough-1", is_staff=True)
    shadow = shadows.shadow_start(policy=draft_of(category_thresholds=TIMID), provider_name="local", user=None)
    reviews = [judged_live(api_client, text) for text in TEXTS]
    shadows.shadows_run(deadline=time.monotonic() + 10)
    verdicts = {v.review_id: v.label for v in shadow.verdicts.all()}
    # Live: rejected, approved, to a human (the default term list has "stupid"), approved. The
    # shadow (TIMID): to a human but the last, approved. It agrees with live on 2 and 3. A worked
    # example: a moderator rejects reviews 2 and 3; the shadow held back 2 (agrees with them) and
    # approved 3 (disagrees).
    assert [verdicts[r.pk] for r in reviews] == ["manual_review", "manual_review", "manual_review", "approved"]
    assert [r.status for r in reviews] == ["rejected", "approved", "manual_review", "approved"]  # "stupid": a term
    for review in reviews[2:]:
        services.review_override(review_id=review.pk, label=ReviewStatus.REJECTED, reason="insult",
                                 category="insult", moderator=moderator, expected_version=review.version)

    rows = shadows.shadow_agreement(shadow)

    assert sum(r.judged for r in rows) == 4 and sum(r.agree_live for r in rows) == 2
    assert sum(r.human for r in rows) == 2 and sum(r.agree_human for r in rows) == 1
    assert len({r.day for r in rows}) == 1 and {r.category for r in rows} >= {"(none)"}


def test_one_live_shadow_per_version_and_provider_and_stopping_it(local):
    draft = draft_of()
    shadow = shadows.shadow_start(policy=draft, provider_name="local", user=None)
    with pytest.raises(NotApplicable, match="already in shadow"):
        shadows.shadow_start(policy=draft, provider_name="local", user=None)
    with pytest.raises(NotApplicable, match="callback"):
        shadows.shadow_start(policy=draft, provider_name="webhook", user=None)
    shadows.shadow_stop(shadow_id=shadow.pk, user=None)
    with pytest.raises(NotApplicable, match="stopped already"):
        shadows.shadow_stop(shadow_id=shadow.pk, user=None)
    assert shadows.shadow_start(policy=draft, provider_name="local", user=None).pk != shadow.pk


def test_the_shadow_page_shows_agreement_and_disagreements_and_a_supervisor_starts_and_stops_it(
        api_client, local, django_user_model):
    supervisor = staff_browser(django_user_model, "sup-9", "supervisor")
    reader = staff_browser(django_user_model, "mod-8", "moderator")
    draft = draft_of(category_thresholds=TIMID)
    assert reader.post(f"/admin/moderation/moderationpolicy/{draft.pk}/shadow/", {"provider": "local"}).status_code == 403
    response = supervisor.post(f"/admin/moderation/moderationpolicy/{draft.pk}/shadow/", {"provider": "local"})
    shadow = ShadowRun.objects.get()
    assert response.status_code == 302 and response["Location"].endswith(f"/shadowrun/{shadow.pk}/page/")
    for text in TEXTS:
        judged_live(api_client, text)
    shadows.shadows_run(deadline=time.monotonic() + 10)

    html = reader.get(f"/admin/moderation/shadowrun/{shadow.pk}/page/").content.decode()
    disagreeing = shadow.verdicts.exclude(label=models_f("live_label")).count()
    assert html.count('class="disagreement"') == disagreeing >= 1 and 'class="agreement-row"' in html
    assert 'id="shadow-stop"' not in html
    assert reader.post(f"/admin/moderation/shadowrun/{shadow.pk}/stop/").status_code == 403
    assert supervisor.post(f"/admin/moderation/shadowrun/{shadow.pk}/stop/").status_code == 302
    assert ShadowRun.objects.get().stopped_at is not None
    assert "Shadow runs of this version" in supervisor.get(
        f"/admin/moderation/moderationpolicy/{draft.pk}/change/").content.decode()
    assert ModerationPolicy.objects.get(pk=draft.pk).is_draft


def models_f(name):
    from django.db.models import F

    return F(name)


def test_no_transaction_is_held_while_the_shadow_judges_and_a_dead_workers_lease_is_taken_over(api_client, local,
                                                                                               monkeypatch):
    """docs/design.md, invariant 6: the shadow's provider (a server across the network, maybe)
    judges with no transaction open, under a lease on the shadow's row; a worker that died holding
    the lease holds the batch until the lease runs out, then the next worker judges it."""
    from datetime import timedelta
    import uuid

    from django.utils import timezone

    from moderation.db.transactions import in_transaction

    shadow = shadows.shadow_start(policy=draft_of(category_thresholds=TIMID), provider_name="local", user=None)
    for text in TEXTS:
        judged_live(api_client, text)
    calls = count_model_calls(monkeypatch)
    open_while_judging = []
    real_kept = shadows.kept_answers
    monkeypatch.setattr(shadows, "kept_answers",
                        lambda *a, **kw: (open_while_judging.append(in_transaction()), real_kept(*a, **kw))[1])
    ShadowRun.objects.filter(pk=shadow.pk).update(lease=uuid.uuid4(), leased_until=timezone.now() + timedelta(minutes=5))

    assert shadows.shadows_run(deadline=time.monotonic() + 10) == 0 and calls == []  # the dead worker's lease holds

    ShadowRun.objects.filter(pk=shadow.pk).update(leased_until=timezone.now() - timedelta(seconds=1))
    assert shadows.shadows_run(deadline=time.monotonic() + 10) == len(TEXTS)

    shadow.refresh_from_db()
    assert open_while_judging == [False] and sum(len(texts) for texts in calls) == len(TEXTS)
    assert shadow.judged == len(TEXTS) and shadow.lease is None and shadow.leased_until is None
    assert ShadowVerdict.objects.filter(shadow=shadow).count() == len(TEXTS)


def test_a_batch_that_outlived_its_lease_writes_nothing_the_worker_that_took_it_over_does(api_client, local,
                                                                                         monkeypatch):
    from datetime import timedelta

    from django.utils import timezone

    shadow = shadows.shadow_start(policy=draft_of(category_thresholds=TIMID), provider_name="local", user=None)
    for text in TEXTS:
        judged_live(api_client, text)
    real_kept, slow_worker_done = shadows.kept_answers, []

    def judged_while_the_lease_runs_out(*args, **kwargs):
        answers = real_kept(*args, **kwargs)
        if not slow_worker_done:  # the first (slow) worker: its lease runs out, another takes the batch
            slow_worker_done.append(True)
            ShadowRun.objects.filter(pk=shadow.pk).update(leased_until=timezone.now() - timedelta(seconds=1))
            assert shadows.shadows_run(deadline=time.monotonic() + 10) == len(TEXTS)
        return answers

    monkeypatch.setattr(shadows, "kept_answers", judged_while_the_lease_runs_out)

    assert shadows.shadows_run(deadline=time.monotonic() + 10) == 0  # the slow worker's verdicts are dropped

    shadow.refresh_from_db()
    assert shadow.judged == len(TEXTS) and ShadowVerdict.objects.filter(shadow=shadow).count() == len(TEXTS)
