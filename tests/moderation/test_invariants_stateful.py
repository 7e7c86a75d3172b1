"""Property-based: random interleavings of claims, moderation jobs (`tasks.moderate_review`, in
batches of 1 and of 16, with the local provider and the webhook one), results (live, old and
duplicate), timeouts, acceptances, provider-reported failures, supersedes, overrides by two
moderators, escalations, reprocesses, user reports and appeals, and authors (rejections of their
reviews climbing the ladder, moderators' account actions from current and stale pages, account
appeals, expiry runs as if days had passed), with the invariants of docs/design.md checked after
every step (hypothesis, stateful)."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from audit.models import EventKind, PipelineEvent, ReviewTransition
from moderation.errors import IllegalTransition
from moderation import providers, services, tasks
from moderation.errors import ModerationError
from moderation.models import (
    AccountAction,
    AccountAppeal,
    AccountAppealStatus,
    Appeal,
    Author,
    Cause,
    ContentReview,
    ModerationRequest,
    Report,
    RequestStatus,
    ReviewStatus,
    StandingCause,
    StandingTransition,
)
from moderation.providers import Accepted
from moderation.providers.base import ProviderServerError, ProviderTimeout
from moderation.providers.webhook import WebhookProvider
from tests.helpers import LoopbackJsonServer, decided, examples, result, submit
from moderation.privacy.erasure import content_erase
from moderation.invariants import violations

ANSWERS = st.sampled_from(["approve", "reject", "unsure", "timeout", "5xx", "accepted"])
SCORES = {"approve": 0.1, "reject": 0.95, "unsure": 0.6}


class Pipeline(RuleBasedStateMachine):
    reviews = Bundle("reviews")

    def __init__(self):
        super().__init__()
        self.client = self.scripted = self.moderator = None
        self.seen: list = []

    # --- actions -------------------------------------------------------------------------------

    @precondition(lambda self: len(self.seen) < 3)  # a few reviews, many steps each: deep interleavings
    @rule(target=reviews)
    def submit(self):
        review = submit(self.client)
        self.seen.append(review.pk)
        return review.pk

    @rule(review_id=reviews)
    def claim(self, review_id):
        services.review_claim(review_id=review_id, worker_id="w-claim")

    @rule(review_id=reviews, answer=ANSWERS)
    def dispatch(self, review_id, answer):
        key = ContentReview.objects.get(pk=review_id).active_idempotency_key
        request = ModerationRequest.objects.filter(idempotency_key=key).first()
        if request is None:
            return
        self.provider_answers(answer)
        ModerationRequest.objects.filter(pk=request.pk).update(next_attempt_at=None)
        services.request_dispatch(request_id=request.pk, worker_id="w-dispatch")

    def provider_answers(self, answer: str) -> None:
        """The scripted provider answers the next call so."""
        self.scripted.script = [
            {"timeout": ProviderTimeout("slow"), "5xx": ProviderServerError("503", http_status=503),
             "accepted": Accepted("prov-scripted")}.get(answer) or result(SCORES[answer])
        ]

    @rule(review_id=reviews, which=st.sampled_from(["live", "superseded", "oldest"]), score=st.sampled_from([0.1, 0.6, 0.95]))
    def callback(self, review_id, which, score):
        """A result for the live operation, for one replaced by a supersede (late), or the first."""
        requests = list(ModerationRequest.objects.filter(review_id=review_id).order_by("id"))
        replaced = [r for r in requests if r.status == RequestStatus.SUPERSEDED]
        live = ContentReview.objects.get(pk=review_id).active_idempotency_key
        key = {"live": live, "superseded": replaced[-1].idempotency_key if replaced else None,
               "oldest": requests[0].idempotency_key if requests else None}[which]
        if key:
            services.review_finalize(idempotency_key=key, result=result(score), cause=Cause.PROVIDER_CALLBACK)

    @rule(review_id=reviews)
    def provider_reports_failure(self, review_id):
        key = ContentReview.objects.get(pk=review_id).active_idempotency_key
        if key:
            services.request_fail_reported(idempotency_key=key, error="model crashed")

    @rule(review_id=reviews)
    def supersede(self, review_id):
        self._tolerating(services.review_supersede, review_id=review_id, reason="silent")

    @rule(review_id=reviews, label=st.sampled_from([ReviewStatus.APPROVED, ReviewStatus.REJECTED]),
          who=st.sampled_from([0, 1]))
    def override(self, review_id, label, who):
        """By either of two moderators: on an appeal, the one who made the appealed decision is refused."""
        version = ContentReview.objects.get(pk=review_id).version
        self._tolerating(services.review_override, review_id=review_id, label=label, reason="checked",
                         category="harassment" if label == ReviewStatus.REJECTED else "",
                         moderator=(self.moderator, self.second)[who], expected_version=version)

    @rule(review_id=reviews)
    def escalate(self, review_id):
        self._tolerating(services.review_escalate, review_id=review_id, reason="look", moderator=self.moderator)

    @rule(review_id=reviews)
    def reprocess(self, review_id):
        self._tolerating(services.review_reprocess, review_id=review_id, actor="command", actor_id="t")

    def _tolerating(self, service, **kwargs):
        try:
            service(**kwargs)
        except ModerationError:
            pass  # refused as the state machine says: the invariants below check nothing changed

    # --- invariants, after every step (moderation/invariants.py, shared with race_lab) ----------

    @invariant()
    def every_invariant_holds(self):
        assert violations(self.seen) == []


class PipelineThroughTheJob(Pipeline):
    """The same, with the job production runs: `tasks.moderate_review` claims its review and up to
    MODERATION_BATCH_SIZE - 1 other pending ones, and asks a real provider adapter (the local
    model, or the webhook adapter over HTTP to `provider_server`)."""

    provider_server: ProviderServer | None = None

    @rule(review_id=Pipeline.reviews, answer=ANSWERS)
    def moderate(self, review_id, answer):
        self.provider_answers(answer)
        tasks.moderate_review(review_id)

    def provider_answers(self, answer: str) -> None:
        if self.provider_server is not None:  # the local model answers as it judges the text
            self.provider_server.answer = answer


class ProviderServer:
    """The HTTP end of a webhook provider, on loopback: it answers every POST as `answer` says (a
    result at once, 202 and a callback later, a 503, or too late for the client's timeout)."""

    def __init__(self, timeout_s: float):
        self.answer, self.timeout_s = "accepted", timeout_s
        self.http = LoopbackJsonServer(self.respond)
        self.url = self.http.url

    def respond(self, path: str, headers, body: bytes) -> tuple[int, object, float]:
        status, answer = self.reply(headers["Idempotency-Key"])
        return status, answer, self.timeout_s * 1.5 if self.answer == "timeout" else 0

    def reply(self, key: str) -> tuple[int, dict]:
        if self.answer in SCORES:
            score = SCORES[self.answer]
            return 200, {"id": f"prov-{key}", "idempotency_key": key, "model": "m-1", "results": [
                {"flagged": score >= 0.5, "categories": {"harassment": score >= 0.5},
                 "category_scores": {"harassment": score}}]}
        if self.answer == "5xx":
            return 503, {"error": "unavailable"}
        return 202, {"id": f"prov-{key}", "status": "queued"}


class PipelineWithReportsAndAppeals(Pipeline):
    """The same, with clients' users reporting reviews and appealing rejections between steps."""

    reporters = 0

    @precondition(lambda self: len(self.seen) < 4)
    @rule(target=Pipeline.reviews, label=st.sampled_from([ReviewStatus.APPROVED, ReviewStatus.REJECTED]))
    def submit_decided(self, label):
        """A review the provider has decided already: what users report and appeal."""
        review = decided(self.client, label)
        self.seen.append(review.pk)
        return review.pk

    @rule(review_id=Pipeline.reviews, fresh=st.sampled_from([1, 2]), again=st.booleans())
    def report(self, review_id, fresh, again):
        """`fresh` new reporters, and perhaps the first reporter again (the same report back)."""
        reporters = [f"user-{self.reporters + i}" for i in range(fresh)] + (["user-0"] if again else [])
        self.reporters += fresh
        for reporter in reporters:
            services.report_file(review_id=review_id, reporter_id=reporter, reason="harassment")

    @rule(review_id=Pipeline.reviews)
    def notice(self, review_id):
        """A DSA notice: to a human whatever the threshold, resolved at once on a rejection."""
        self.reporters += 1
        services.report_file(review_id=review_id, reporter_id=f"user-{self.reporters}", reason="harassment",
                             kind="dsa_notice")

    @rule(days=st.sampled_from([0, 31]))
    def expire_reports(self, days):
        """The reports' expiry job, as if `days` had passed: 31 expires every user report left open."""
        services.reports_expire_due(now=timezone.now() + timedelta(days=days))

    @rule(review_id=Pipeline.reviews)
    def appeal(self, review_id):
        self._tolerating(services.appeal_file, review_id=review_id, appellant_id="owner", statement="wrong")

    @rule(review_id=Pipeline.reviews, label=st.sampled_from([ReviewStatus.APPROVED, ReviewStatus.REJECTED]),
          who=st.sampled_from([0, 1]))
    def appeal_then_decide(self, review_id, label, who):
        """An appeal, then at once a decision by either moderator (the search rarely lines the
        two up on one review otherwise)."""
        self.appeal(review_id)
        self.override(review_id, label, who)


class PipelineWithErasure(PipelineWithReportsAndAppeals):
    """The same, with contents erased between steps (docs/design.md, invariant 16)."""

    @rule(review_id=Pipeline.reviews)
    def erase(self, review_id):
        content_erase(review_id=review_id, actor="api", actor_id="acme", reason="the author asked")

    @precondition(lambda self: len(self.seen) < 4)
    @rule(target=Pipeline.reviews)
    def submit_appealed(self):
        """A rejection under appeal, for the erasure to meet (the search rarely lines them up)."""
        review_id = self.submit_decided(ReviewStatus.REJECTED)
        self.appeal(review_id)
        return review_id


AUTHORS = st.sampled_from(["u1", "u2"])
# A short ladder (test_random_interleavings_with_authors_keep_every_invariant publishes it), so a
# few rejections climb it: 1 point warns, 2 suspend for a day, 4 ban.
SHORT_LADDER = [{"points": 1, "action": "warn"}, {"points": 2, "action": "suspend", "days": 1},
                {"points": 4, "action": "ban"}]


class PipelineWithAuthors(PipelineWithReportsAndAppeals):
    """The same, with the reviews written by two authors: their rejections and approvals land
    (from the provider and from the moderators' overrides above), two moderators act on the
    authors from the page they read or an older one, the authors appeal, and the expiry job runs
    as if days had passed (`now`: a suspension ends, or every strike lapses). Each example has
    authors of its own (the database outlives the example)."""

    def __init__(self):
        super().__init__()
        self.run = uuid.uuid4().hex[:8]

    @precondition(lambda self: len(self.seen) < 6)
    @rule(target=Pipeline.reviews, author=AUTHORS)
    def submit_authored(self, author):
        review, _ = services.review_submit(client=self.client, external_id=uuid.uuid4().hex, kind="text",
                                           text="a sentence", author_id=f"{author}-{self.run}")
        self.seen.append(review.pk)
        return review.pk

    @precondition(lambda self: len(self.seen) < 6)
    @rule(target=Pipeline.reviews, author=AUTHORS,
          label=st.sampled_from([ReviewStatus.APPROVED, ReviewStatus.REJECTED, ReviewStatus.REJECTED]))
    def authored_decided(self, author, label):
        """An author's review the provider decides at once (rejections count strikes)."""
        review_id = self.submit_authored(author)
        key = services.review_claim(review_id=review_id, worker_id="w-author").idempotency_key
        services.review_finalize(idempotency_key=key, result=result(SCORES["approve" if label == ReviewStatus.APPROVED
                                                                        else "reject"]), cause=Cause.PROVIDER_RESULT)
        return review_id

    def _author(self, author):
        return Author.objects.filter(client=self.client, author_id=f"{author}-{self.run}").values_list(
            "pk", "version").first()

    @rule(author=AUTHORS, action=st.sampled_from(["warn", "suspend", "ban", "lift"]), stale=st.booleans(),
          who=st.sampled_from([0, 1]))
    def act(self, author, action, stale, who):
        """A moderator warns, suspends, bans or lifts, from the author's current page or one
        version older (refused: StaleAuthor)."""
        found = self._author(author)
        if found is None:
            return
        pk, version = found
        kwargs = {"author_pk": pk, "moderator": (self.moderator, self.second)[who], "reason": "checked",
                  "expected_version": version - 1 if stale else version}
        if action == "lift":
            self._tolerating(services.author_lift, **kwargs)
        else:
            self._tolerating(services.author_act, action=action, days=1 if action == "suspend" else None, **kwargs)

    @rule(author=AUTHORS)
    def account_appeal(self, author):
        if self._author(author) is not None:
            self._tolerating(services.account_appeal_file, client=self.client, author_id=f"{author}-{self.run}",
                             statement="unfair")

    @rule(who=st.sampled_from([0, 1]), outcome=st.sampled_from([AccountAppealStatus.UPHELD,
                                                                 AccountAppealStatus.OVERTURNED]))
    def account_appeal_resolve(self, who, outcome):
        """Either moderator resolves the oldest open account appeal (the one who imposed the
        action is refused)."""
        appeal = AccountAppeal.objects.filter(author__client=self.client, author__author_id__endswith=self.run,
                                              status=AccountAppealStatus.OPEN).first()
        if appeal is not None:
            self._tolerating(services.account_appeal_resolve, appeal_id=appeal.pk,
                             moderator=(self.moderator, self.second)[who], outcome=outcome, reason="looked again")

    @rule(author=AUTHORS, who=st.sampled_from([0, 1]), resolver=st.sampled_from([0, 1]),
          outcome=st.sampled_from([AccountAppealStatus.UPHELD, AccountAppealStatus.OVERTURNED]), lift=st.booleans())
    def suspend_appeal_resolve(self, author, who, resolver, outcome, lift):
        """A suspension from the current page, its appeal, a resolution by either moderator, and
        perhaps a lift (the search rarely lines them up otherwise)."""
        self.act(author, "suspend", False, who)
        self.account_appeal(author)
        self.account_appeal_resolve(resolver, outcome)
        if lift:
            self.act(author, "lift", False, resolver)

    @rule(days=st.sampled_from([0, 2, 91]))
    def sweep(self, days):
        """The expiry job, as if `days` had passed: 2 ends a suspension, 91 lapses every strike."""
        services.authors_sweep(now=timezone.now() + timedelta(days=days))


def run_machine(client, scripted, moderator, *, shrink: bool = True, examples: int = 30, base=Pipeline,
                provider_server: ProviderServer | None = None) -> None:
    class Machine(base):
        def __init__(self):
            super().__init__()
            self.client, self.scripted, self.moderator = client, scripted, moderator
            self.provider_server = provider_server
            self.second = get_user_model().objects.get_or_create(username="second-moderator")[0]

    phases = list(Phase) if shrink else [Phase.explicit, Phase.reuse, Phase.generate]
    run_state_machine_as_test(Machine, settings=settings(
        max_examples=examples, stateful_step_count=40, deadline=None, database=None, derandomize=True, phases=phases,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    ))


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_random_interleavings_keep_every_invariant(api_client, scripted, django_user_model):
    run_machine(api_client, scripted, django_user_model.objects.create_user("mia"), examples=examples(30))


@pytest.fixture
def provider_server(settings):
    """The webhook adapter, pointed at a ProviderServer (timeouts short, no HTTP retries)."""
    settings.PROVIDER_TIMEOUT_S = settings.PROVIDER_CONNECT_TIMEOUT_S = 0.2
    settings.PROVIDER_HTTP_RETRIES, settings.PROVIDER_API_KEY = 0, "key-1"
    server = ProviderServer(settings.PROVIDER_TIMEOUT_S)
    settings.PROVIDER_URL = server.url
    providers.register("webhook", WebhookProvider)  # a new adapter, for the new URL
    yield server
    server.http.shutdown()
    providers.register("webhook", WebhookProvider)


@pytest.mark.usefixtures("on_commit_callbacks_run")
@pytest.mark.parametrize("size", [1, 16])
@pytest.mark.parametrize("provider", ["local", "webhook"])
def test_random_interleavings_of_moderation_jobs_keep_every_invariant(api_client, django_user_model, settings,
                                                                      request, provider, size):
    settings.MODERATION_PROVIDER, settings.MODERATION_BATCH_SIZE = provider, size
    settings.BREAKER_COOLDOWN_S = 0  # an open circuit lets a trial through at once: its job claims one review
    server = request.getfixturevalue("provider_server") if provider == "webhook" else None
    # (a batch of several is reached only by the full search: its count stays)
    run_machine(api_client, None, django_user_model.objects.create_user("mia"), examples=examples(5) if size == 1 else 5,
                base=PipelineThroughTheJob, provider_server=server)

    # The search ran jobs that decided reviews; in batches of 16, a job claimed several at once.
    claims = Counter(ReviewTransition.objects.filter(cause=Cause.JOB_STARTED).exclude(job_id="")
                     .values_list("job_id", flat=True))
    assert claims and (max(claims.values()) > 1) == (size > 1), claims
    assert ReviewTransition.objects.filter(cause=Cause.PROVIDER_RESULT).exists()


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_random_interleavings_with_reports_and_appeals_keep_every_invariant(api_client, scripted, django_user_model):
    # Two reporters move an approved review to a human, so report steps often cross the threshold.
    services.policy_publish(reject_threshold=0.9, review_threshold=0.5, report_threshold=2)
    run_machine(api_client, scripted, django_user_model.objects.create_user("mia"), examples=examples(30),
                base=PipelineWithReportsAndAppeals)

    # The search reached the new transitions and resolved appeals both ways.
    causes = set(ReviewTransition.objects.values_list("cause", flat=True))
    assert {Cause.USER_REPORTS, Cause.APPEAL} <= causes
    assert set(Appeal.objects.values_list("status", flat=True)) >= {"upheld", "overturned"}
    # Reports were judged both ways, and expired (docs/design.md, invariant 19).
    assert set(Report.objects.values_list("outcome", flat=True)) >= {"actioned", "no_action", "expired"}


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_random_interleavings_with_authors_keep_every_invariant(api_client, scripted, django_user_model):
    services.policy_publish(reject_threshold=0.9, review_threshold=0.5, report_threshold=2,
                            enforcement_ladder=SHORT_LADDER)
    run_machine(api_client, scripted, django_user_model.objects.create_user("mia"), examples=10,
                base=PipelineWithAuthors)

    # The search climbed the ladder, acted by hand, and ended restrictions every way.
    taken = set(AccountAction.objects.values_list("action", "cause"))
    assert {("warn", "strikes"), ("suspend", "strikes"), ("suspend", "moderator")} <= taken, taken
    ended = set(StandingTransition.objects.values_list("cause", flat=True))
    assert {StandingCause.EXPIRED, StandingCause.LIFTED, StandingCause.OVERTURNED} <= ended, ended
    assert set(AccountAppeal.objects.values_list("status", flat=True)) >= {"upheld", "overturned"}


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_the_author_machine_reports_a_violation_when_the_ladder_guard_is_removed(
    api_client, scripted, django_user_model, monkeypatch
):
    """The ladder takes a rung only above the author's standing; without that guard, a warned
    author's next strike warns again, and the checker finds an automatic action that did not
    raise the standing."""
    from moderation.models import ActionCause, ActionKind
    from moderation.errors import IllegalStandingChange
    from moderation.services import account_actions, strikes

    def ladder_unguarded(author, policy, strike, before, *, now, actor, actor_id, writes):
        rung = account_actions.ladder_rung(policy.enforcement_ladder, author.strike_points)
        if rung is None:
            return None
        writes.execute()
        kind = ActionKind(rung["action"])
        until = now + timedelta(days=rung["days"]) if kind == ActionKind.SUSPEND else None
        try:
            return account_actions._act_locked(author, kind, cause=ActionCause.STRIKES, until=until, reason="rung",
                                               moderator=None, policy=policy, actor=actor, actor_id=actor_id,
                                               now=now, strike=strike)
        except IllegalStandingChange:  # the state machine still refuses what it refuses (a ban of a ban)
            return None

    monkeypatch.setattr(strikes, "ladder_climb_locked", ladder_unguarded)
    services.policy_publish(reject_threshold=0.9, review_threshold=0.5, enforcement_ladder=SHORT_LADDER)
    with pytest.raises(AssertionError, match="did not raise the standing"):
        run_machine(api_client, scripted, django_user_model.objects.create_user("mia"), shrink=False, examples=30,
                    base=PipelineWithAuthors)


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_random_interleavings_with_erasure_keep_every_invariant(api_client, scripted, django_user_model):
    run_machine(api_client, scripted, django_user_model.objects.create_user("mia"), examples=6,
                base=PipelineWithErasure)

    # The search erased reviews under way and under appeal.
    erased = set(ReviewTransition.objects.filter(cause=Cause.CONTENT_ERASED).values_list("from_status", flat=True))
    assert erased >= {ReviewStatus.MANUAL_REVIEW}, erased


# The property test can fail: with one guard of finalize taken out, it reports a violation.

def _classify_without(guard: str):
    from moderation.models import ResultOutcome

    def classify(review, request, provider=None):
        if request.status == RequestStatus.COMPLETED:
            return ResultOutcome.DUPLICATE
        if guard != "active key" and (
            request.status == RequestStatus.SUPERSEDED or review.active_idempotency_key != request.idempotency_key
        ):
            return ResultOutcome.STALE
        if guard != "still processing" and review.status != ReviewStatus.PROCESSING:
            return ResultOutcome.ALREADY_FINAL
        return ResultOutcome.APPLIED

    return classify


class PipelineOpeningWithALateResult(Pipeline):
    """The same, each example opening with the interleaving a stale result needs: a review
    claimed, its operation superseded, and the provider's late result for the replaced operation
    while the review waits for the new one; the steps after it interleave as usual. The search
    lines the three up on one review only rarely (it leaves a few rules out of each example, and
    one CI run took more than 100 examples, over three minutes), so the opening makes the finding
    certain at the first example."""

    @initialize(target=Pipeline.reviews, score=st.sampled_from([0.1, 0.6, 0.95]))
    def open_with_a_late_result(self, score):
        review_id = self.submit()
        self.claim(review_id)
        self.supersede(review_id)
        self.callback(review_id, "superseded", score)
        return review_id


class PipelineOpeningWithAResultAfterEscalation(Pipeline):
    """The same, each example opening with a result for a review a moderator escalated while its
    operation was under way (the escalation closes the operation, the key stays the review's):
    certain at the first example, where the search took a dozen."""

    @initialize(target=Pipeline.reviews, score=st.sampled_from([0.1, 0.6, 0.95]))
    def open_with_a_result_after_escalation(self, score):
        review_id = self.submit()
        self.claim(review_id)
        self.escalate(review_id)
        self.callback(review_id, "live", score)
        return review_id


# (with a guard out, a finalize raises inside a savepoint-less block: the transactions are real)
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("guard", "caught_as", "machine"), [
    # the invariant checker reports a superseded operation completed later
    ("active key", AssertionError, PipelineOpeningWithALateResult),
    # the state machine refuses to apply a result to a final review
    ("still processing", IllegalTransition, PipelineOpeningWithAResultAfterEscalation),
])
def test_the_property_test_reports_a_violation_when_a_finalize_guard_is_removed(
    api_client, scripted, django_user_model, monkeypatch, guard, caught_as, machine
):
    from moderation.services import results

    monkeypatch.setattr(results, "result_classify", _classify_without(guard))
    with pytest.raises(caught_as):  # without shrinking, to fail fast
        run_machine(api_client, scripted, django_user_model.objects.create_user("mia"), shrink=False, examples=5,
                    base=machine)


@pytest.mark.usefixtures("on_commit_callbacks_run")
@pytest.mark.parametrize(("machine", "recorded"), [
    (PipelineOpeningWithALateResult, EventKind.STALE_RESULT),
    (PipelineOpeningWithAResultAfterEscalation, EventKind.ALREADY_FINAL),
])
def test_the_openings_of_the_guard_searches_keep_every_invariant_with_the_guards_in(
    api_client, scripted, django_user_model, machine, recorded
):
    """The openings above are interleavings the pipeline must survive: with finalize's guards
    in, the late result is stale and the result after the escalation already final (each
    recorded, nothing changed)."""
    run_machine(api_client, scripted, django_user_model.objects.create_user("mia"), shrink=False, examples=1,
                base=machine)

    assert PipelineEvent.objects.filter(kind=recorded).exists()


@pytest.mark.django_db(transaction=True)
def test_the_job_machine_reports_a_violation_when_a_finalize_guard_is_removed(api_client, django_user_model,
                                                                             settings, monkeypatch):
    from moderation.services import results

    settings.MODERATION_PROVIDER, settings.MODERATION_BATCH_SIZE = "local", 16
    monkeypatch.setattr(results, "result_classify", _classify_without("still processing"))
    with pytest.raises(IllegalTransition):  # a result applied to a review a human already decided
        run_machine(api_client, None, django_user_model.objects.create_user("mia"), shrink=False, examples=30,
                    base=PipelineThroughTheJob)
