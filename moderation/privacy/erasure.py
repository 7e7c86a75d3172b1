"""Erasure that keeps the audit chain (docs/design.md, invariant 16; GDPR Art. 17 with DSA
record-keeping).

A client (`DELETE /api/v1/reviews/{id}/content`) or an operator (`manage.py erase_content`)
erases a content. Every column that holds it, or may quote it, is redacted; the review, its
transitions, decisions, operations, inbox keys and every id stay, and a tombstone
(`ContentErasure`) says who erased it, when and why. A review still being moderated is stopped
first, under its row lock, so no provider is called with erased content after the erasure
commits (dispatch also refuses erased content, whatever the review's state).

Every erasure goes through `content_erase` (one review, in one transaction, `_erase_locked`);
`author_content_erase` erases each of an author's reviews by it, then the author's own record
(`_author_words_erase`). A check that must keep something from erasure belongs there: a legal
hold is one (moderation/privacy/holds.py; docs/legal-holds.md). Held content is not erased: the
request is recorded (`DeferredErasure`) and runs when no hold keeps it (`erasures_deferred_run`).

`REDACTED` is the one list of the columns that hold content. A new column that can hold a
user's words (a report's detail, an appeal's statement, a notification's payload...) is one
line here; the test that erases a content then searches every text column of the database for
what it erased, so a column missing here fails it, and the test that greps `pg_dump` after
erasure finds a moderator's words left anywhere. Copies kept by django-simple-history of a
listed model are redacted with it.

People's words go whole, whoever wrote them: a report's detail, an appeal's statement, and every
reason, note and explanation a moderator, an operator or the platform wrote about the review (a
decision's reason and explanation, the transition log's reasons, the operation's last error, the
notes), and their copies in the outbox (the `reason`s and `explanation`s of a payload, its shape
kept: moderation.text.quotes.words_erased). Structure stays: categories, canned reason codes, rules,
terms and spans, the policy version, the moderator, so a decision is still explained by who and
under which policy, and its explanation now says "[erased]". Statements of reasons never carry a
moderator's free text (DSA Art. 24(5)); only a quote of the content would go from them. What
providers wrote (errors, callback bodies) loses the quotes of the content it holds: a run of
QUOTE_MIN characters of it anywhere (moderation.text.quotes). The tombstone's own reason keeps no
such run of what was erased. An appeal still open on the content is closed in the same
transaction (`_close_appeal_locked`), after the redaction: the system decisions erasure writes
say, in the platform's words, that the content was erased.

An image's bytes go at once, with what was read of them (sha256, type, size); its PDQ hash and
quality stay, as a bank match's evidence. The job never stores bytes it fetched for content
erased meanwhile (moderation/services/media.py checks under the review's lock).

An author's strikes and account actions outlive the erasure of one of the author's contents as
facts (a strike's category and points, an action, its reason and the strikes it rested on): only
a quote of the erased content in them goes. Erasing the author (`author_content_erase`) erases
every content of the author, each review by `content_erase`, so each keeps every guarantee above,
and then the author's record's words: account actions' and standing changes' reasons, account
appeals' statements and resolutions, and their notifications' `reason`s and `explanation`s, each
replaced whole under the author's row lock; the actions, their strikes and standing stay.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.apps import apps
from django.db import connection, models, transaction
from django.utils import timezone
from simple_history.exceptions import NotHistoricalModelError
from simple_history.utils import get_history_model_for_model

from audit import context
from callbacks.payload import redacted as redacted_callback
from moderation.models import (
    ERASED,
    Author,
    Cause,
    ContentErasure,
    ContentReview,
    Decision,
    DecisionSource,
    DeferredErasure,
    HoldScope,
    MediaRemoval,
    ModerationRequest,
    ProviderAnswer,
    ReviewMedia,
    ReviewStatus,
)
from moderation.privacy.holds import held_q, holds_active, review_holds
from moderation.text.quotes import Quotes, content_quotes, quote_runs, scrub, words_erased
from moderation.transparency.reasons import reasons
from moderation.verdicts import rule_text
from moderation.services.appeals import appeal_open_locked
from moderation.services.decide import decide_locked
from moderation.services.outbox import outbox_payload
from moderation.services.pipeline import request_close_live_locked
from moderation.services.report_outcomes import reports_resolve_erased_locked
from moderation.services.transitions import review_queue_leave

REASON_MAX_CHARS = 2000
# What the client reads of the system decisions erasure makes (moderation.transparency.reasons shows a system
# decision's explanation as written: it is the platform's own text, never a provider's error).
ERASED_BEFORE_DECISION = "The content was erased before a decision: nothing is left to moderate."
ERASED_UNDER_APPEAL = ("The content was erased while its appeal was open: nothing is left to judge, so the "
                       "appeal is closed and the rejection stands.")


class How(enum.StrEnum):
    CLEAR = "clear"  # the column is the content, or read from it: emptied ("", {}, NULL or its default)
    QUOTES = "quotes"  # free text that may quote it (a provider's errors and names): each quote replaced
    WHOLE = "whole"  # people's words about it (reasons, notes, explanations, reports, appeals): replaced whole
    WORDS = "words"  # a stored body (JSON, or JSON text): its reasons and explanations whole, quotes elsewhere
    CALLBACK = "callback"  # a provider's raw callback body: cut to the protocol's ids and scores
    MATCHES = "matches"  # a decision's rule matches: rule, term and span stay; words as written (old rows) go


@dataclass(frozen=True)
class Redact:
    """One column to redact: `model` ("app.Model") and `field`, and how its rows are found: when
    a review is erased, by `review` (the ORM path from the model to the review) or `key` (a column
    holding the idempotency key of one of the review's operations); when an author is erased, by
    `author` (the path from the model to the author)."""

    model: str
    field: str
    how: How = How.QUOTES
    review: str = ""
    key: str = ""
    author: str = ""


REDACTED: tuple[Redact, ...] = (
    Redact("moderation.Content", "text", How.CLEAR, review="review"),
    Redact("moderation.Content", "media_url", How.CLEAR, review="review"),
    Redact("moderation.Content", "metadata", How.CLEAR, review="review"),
    # A provider's error, or why the operation was closed: a moderator's escalation reason.
    Redact("moderation.ModerationRequest", "last_error", How.WHOLE, review="review"),
    Redact("moderation.ProviderAttempt", "error", review="request__review"),
    # A moderator's or an operator's words (an override, an escalation, canned codes' free text,
    # a bulk job's reason as copied), or the platform's about the content; codes stay.
    Redact("moderation.Decision", "reason", How.WHOLE, review="review"),
    # What the API and the webhooks said of the decision (moderation.transparency.reasons), now "[erased]".
    Redact("moderation.Decision", "explanation", How.WHOLE, review="review"),
    # A system decision closing an appeal copies the appealed one's category, a provider's key.
    Redact("moderation.Decision", "category", review="review"),
    Redact("moderation.Decision", "rule_matches", How.MATCHES, review="review"),
    # What a provider named (a model, categories): a hostile or careless one may echo the input.
    Redact("moderation.Decision", "model", review="review"),
    Redact("moderation.Decision", "categories", review="review"),
    Redact("moderation.Decision", "category_scores", review="review"),
    # Where a long text's offending parts lay (offsets and scores, never words), and the whole
    # text's scores: they describe the content, so they go with it.
    Redact("moderation.Decision", "parts", How.CLEAR, review="review"),
    # A model's rationale: its words quote the content, and its span says where the offence lay.
    Redact("moderation.Decision", "rationale", How.CLEAR, review="review"),
    Redact("moderation.DecisionNotification", "payload", How.WORDS, review="review"),
    Redact("moderation.DecisionNotification", "last_error", review="review"),
    Redact("moderation.NotificationAttempt", "error", review="notification__review"),
    Redact("moderation.Report", "detail", How.WHOLE, review="review"),
    Redact("moderation.Appeal", "statement", How.WHOLE, review="review"),
    # Append-only like the transition log, with the same sanctioned path (migration 0009).
    Redact("moderation.ModeratorNote", "text", How.WHOLE, review="review"),
    # A second look's reasons are moderators' words about the content, like notes.
    Redact("moderation.SecondLook", "reason", How.WHOLE, review="review"),
    Redact("moderation.SecondLook", "resolution_reason", How.WHOLE, review="review"),
    # The transition log's one sanctioned change (audit migration 0004): its reasons copy the
    # decisions' (a moderator's codes and words, an escalation's reason).
    Redact("audit.ReviewTransition", "reason", How.WHOLE, review="review"),
    # The author's record (docs/design.md, "Authors"): facts that stay, where a provider's category
    # or a moderator's words may quote the content. Found through the review's author.
    Redact("moderation.Strike", "category", review="review"),
    Redact("moderation.AccountAction", "reason", review="author__reviews"),
    Redact("moderation.AccountAction", "strikes", review="author__reviews"),
    Redact("moderation.StandingTransition", "reason", review="author__reviews"),
    Redact("moderation.AccountAppeal", "statement", review="author__reviews"),
    Redact("moderation.AccountAppeal", "resolution_reason", review="author__reviews"),
    Redact("moderation.DecisionNotification", "payload", review="standing_change__author__reviews"),
    Redact("moderation.DecisionNotification", "payload", review="account_appeal__author__reviews"),
    # ... and when the author is erased, the words of that record go whole (author_content_erase).
    Redact("moderation.AccountAction", "reason", How.WHOLE, author="author"),
    Redact("moderation.StandingTransition", "reason", How.WHOLE, author="author"),
    Redact("moderation.AccountAppeal", "statement", How.WHOLE, author="author"),
    Redact("moderation.AccountAppeal", "resolution_reason", How.WHOLE, author="author"),
    Redact("moderation.DecisionNotification", "payload", How.WORDS, author="standing_change__author"),
    Redact("moderation.DecisionNotification", "payload", How.WORDS, author="account_appeal__author"),
    Redact("audit.PipelineEvent", "detail", How.WORDS, review="review"),
    # A bulk job's reason and search are shared by every review it acted on, and a live job still
    # reads its reason for the reviews to come: it keeps them, but for quotes of the content
    # (the copy of its reason in the erased review's decision and transition goes whole).
    Redact("moderation.BulkJob", "reason", review="items__review"),
    Redact("moderation.BulkJob", "query_words", review="items__review"),
    # Statements of reasons (docs/transparency.md) carry the policy's wording and enumerations,
    # never the content or a moderator's free text (DSA Art. 24(5)): only a quote of the content
    # (a category key a provider echoed) would go.
    Redact("moderation.TransparencyStatement", "facts", review="review"),
    Redact("moderation.TransparencyStatement", "body", review="review"),
    Redact("moderation.TransparencyStatement", "facts", review="account_action__author__reviews"),
    Redact("moderation.TransparencyStatement", "body", review="account_action__author__reviews"),
    # An image's (or audio's) bytes, and what was read of them but the PDQ hash and its quality,
    # which stay (docs/design.md, "Images and hash banks"): the hash is no copy of the image, and
    # a bank's matches must still be explained. The bytes' sha256 would tell who holds the same
    # file: it goes with them. An error may quote the media URL, as may the operation's `media`.
    Redact("moderation.ReviewMedia", "data", How.CLEAR, review="content__review"),
    Redact("moderation.ReviewMedia", "thumbnail", How.CLEAR, review="content__review"),
    Redact("moderation.ReviewMedia", "sha256", How.CLEAR, review="content__review"),
    Redact("moderation.ReviewMedia", "mime", How.CLEAR, review="content__review"),
    Redact("moderation.ReviewMedia", "byte_size", How.CLEAR, review="content__review"),
    Redact("moderation.ReviewMedia", "width", How.CLEAR, review="content__review"),
    Redact("moderation.ReviewMedia", "height", How.CLEAR, review="content__review"),
    Redact("moderation.ReviewMedia", "error", review="content__review"),
    Redact("moderation.ModerationRequest", "media", review="review"),
    Redact("callbacks.ProviderCallback", "payload_json", How.CALLBACK, key="idempotency_key"),
    Redact("callbacks.ProviderCallback", "outcome_detail", key="idempotency_key"),
    Redact("callbacks.ProviderCallback", "process_error", key="idempotency_key"),
)


class NotFound(LookupError):
    """No review or content has this id."""


class _DryRun(Exception):
    """Rolls a dry run back after it did everything a real erasure would."""


@dataclass
class ErasureReport:
    review_id: Any
    content_id: Any
    erased_at: datetime | None
    reason: str
    already_erased: bool = False
    stopped_moderation: bool = False
    redacted: dict[str, int] = field(default_factory=dict)
    for_real: bool = True
    appeal_closed: bool = False  # erasing again closed an appeal an older version left open
    reports_resolved: int = 0  # its open reports, resolved: no moderator will judge them
    held_by: list[int] = field(default_factory=list)  # legal holds that keep it: the erasure is deferred

    @property
    def deferred(self) -> bool:
        return bool(self.held_by)


def review_for(identifier) -> ContentReview:
    """The review a review id or a content id names (raises NotFound)."""
    review = ContentReview.objects.filter(pk=identifier).first() or ContentReview.objects.filter(
        content_id=identifier
    ).first()
    if review is None:
        raise NotFound(f"no review or content with id {identifier}")
    return review


def content_erase(*, review_id, actor: str, actor_id: str, reason: str, for_real: bool = True) -> ErasureReport:
    """Erase a review's content (see the module docstring), in one transaction.

    Without `for_real`, everything is done and then rolled back: the report says exactly what
    a real erasure would change. Erasing an erased content again reports the first erasure and
    changes nothing, but for one repair: an appeal left open on it (erasure before issue 22 did
    not close appeals, and no review queue offers erased content) is closed as erasure closes one now.
    """
    reason = reason.strip()
    if not reason or len(reason) > REASON_MAX_CHARS:
        raise ValueError(f"a reason is required (at most {REASON_MAX_CHARS} characters)")
    with context.bind(review_id=review_id):
        try:
            with transaction.atomic():
                report = _erase_locked(review_id, actor=actor, actor_id=actor_id, reason=reason)
                if not for_real and (not report.already_erased or report.appeal_closed):
                    raise _DryRun(report)
        except _DryRun as dry:
            report = dry.args[0]
            report.for_real = False
            if not report.already_erased and not report.deferred:
                report.erased_at = None
    return report


# A call of the API erases at most this many contents of an author, and starts none after this
# many seconds (far below WEB_WORKER_TIMEOUT_S); the client calls again. A command erases them all.
AUTHOR_ERASE_PER_CALL = 200
AUTHOR_ERASE_SECONDS = 5.0
_AUTHOR_BATCH = 100


@dataclass
class AuthorErasureReport:
    author_pk: int
    reason: str
    erased: int = 0
    stopped_moderation: int = 0
    already_erased: int = 0
    remaining: int = 0
    for_real: bool = True
    redacted: dict[str, int] = field(default_factory=dict)  # the author's own record's words: rows per column
    held: int = 0  # contents a legal hold keeps: their erasure is deferred
    record_held: bool = False  # a hold on the author keeps its record's words too


def author_content_erase(*, author_pk: int, actor: str, actor_id: str, reason: str, for_real: bool = True,
                         limit: int | None = None, stop: Callable[[], bool] = lambda: False,
                         each: Callable[[ErasureReport], None] = lambda report: None) -> AuthorErasureReport:
    """Erase every content of the author (at most `limit`), one review after another, each by
    `content_erase` in a transaction of its own: no transaction holds more than one review's lock
    (an author with thousands of reviews blocks none of them for long), and the author's lock is
    never held here (erasure may decide a review, which locks its author: reviews first).

    Re-running it after a crash, a `stop` (a SIGTERM, a time budget: asked after each review) or
    a `limit` erases what is left: contents erased already are skipped. `each` is told of every review erased (or, in a dry run, that
    would be). Content the author submits while it runs is erased if its review comes after the
    last one read (reviews in id order, which is time order). Then, at every call, the words of
    the author's own record go (`_author_words_erase`), in a transaction of their own."""
    reason = reason.strip()
    if not reason or len(reason) > REASON_MAX_CHARS:
        raise ValueError(f"a reason is required (at most {REASON_MAX_CHARS} characters)")
    reviews = ContentReview.objects.filter(author_id=author_pk)
    report = AuthorErasureReport(author_pk, reason, for_real=for_real,
                                 already_erased=reviews.filter(content__erased_at__isnull=False).count())
    # Held contents are recorded as deferred at once, and not visited one by one at every call (a
    # hold on the author keeps them all); one held since is deferred by content_erase itself.
    report.held = _defer_held(reviews.filter(held_q(), content__erased_at__isnull=True), actor=actor,
                              actor_id=actor_id, reason=reason, for_real=for_real)
    left = reviews.filter(content__erased_at__isnull=True).exclude(held_q()).order_by("pk")
    after, stopped = None, False
    while not stopped and (limit is None or report.erased < limit):
        batch = left.filter(pk__gt=after) if after is not None else left  # a dry run erases nothing: move on
        size = _AUTHOR_BATCH if limit is None else min(_AUTHOR_BATCH, limit - report.erased)
        ids = list(batch.values_list("pk", flat=True)[:size])
        for review_id in ids:
            erased = content_erase(review_id=review_id, actor=actor, actor_id=actor_id, reason=reason,
                                   for_real=for_real)
            after = review_id
            if erased.deferred:
                report.held += 1
            elif erased.already_erased:  # by someone else since the batch was read
                report.already_erased += 1
            else:
                report.erased += 1
                report.stopped_moderation += erased.stopped_moderation
                each(erased)
            if stop():  # asked after each review, so that every call gets on
                stopped = True
                break
        stopped = stopped or not ids
    report.remaining = left.filter(pk__gt=after).count() if not for_real and after else left.count()
    report.record_held = holds_active().filter(author_id=author_pk, scope=HoldScope.AUTHOR).exists()
    if not report.record_held:
        report.redacted = _author_words_erase(author_pk, for_real=for_real)
    return report


def _defer_held(held, *, actor: str, actor_id: str, reason: str, for_real: bool) -> int:
    """Record the erasure of the `held` reviews as deferred (once each); their count."""
    pks = list(held.values_list("pk", flat=True))
    if for_real:
        DeferredErasure.objects.bulk_create(
            [DeferredErasure(review_id=pk, actor=actor, actor_id=actor_id, reason=reason) for pk in pks],
            ignore_conflicts=True)  # (one pending per review: a unique index)
    return len(pks)


def _review_locked(review_id) -> ContentReview:
    review = (
        ContentReview.objects.select_for_update(of=("self",))
        .select_related("content", "client")
        .filter(pk=review_id)
        .first()
    )
    if review is None:
        raise NotFound(f"no review with id {review_id}")
    return review


def _erase_locked(review_id, *, actor: str, actor_id: str, reason: str) -> ErasureReport:
    review = _review_locked(review_id)
    content = review.content
    if content.erased_at is None and (held_by := review_holds(review.pk)):
        # Asked holding the review's lock, which placing a hold takes too (moderation/privacy/holds.py).
        if not DeferredErasure.objects.filter(review=review, done_at__isnull=True).exists():
            DeferredErasure.objects.create(review=review, actor=actor, actor_id=actor_id, reason=reason)
        return ErasureReport(review.pk, content.pk, None, reason, held_by=held_by)
    if content.erased_at is not None:
        DeferredErasure.objects.filter(review=review, done_at__isnull=True).update(done_at=timezone.now())
        tombstone = content.erasure
        return ErasureReport(review.pk, content.pk, tombstone.erased_at, tombstone.reason, already_erased=True,
                             stopped_moderation=tombstone.stopped_moderation, redacted=tombstone.redacted,
                             appeal_closed=_close_appeal_locked(review, actor=actor, actor_id=actor_id),
                             reports_resolved=reports_resolve_erased_locked(review, now=timezone.now()))
    quotes = content_quotes(content, also=_quoted_matches(review))
    counts, said = _redact(review, quotes)
    # Provider answers kept for backtests and shadows (their rationale may quote the text): gone
    # with the content, whichever model gave them.
    ProviderAnswer.objects.filter(text_digest=ProviderAnswer.digest_of(rule_text(content))).delete()
    # The erasure's own decisions come after the redaction, so that their words (the platform's:
    # the content was erased) stay, and from the review read again, so that nothing they copy of
    # it (a history row) brings back what was redacted.
    review = _review_locked(review_id)
    _close_appeal_locked(review, actor=actor, actor_id=actor_id)
    stopped = _stop_moderation_locked(review, actor=actor, actor_id=actor_id)
    # The tombstone keeps why, not a copy of what was erased (runs only: a short "spam" stays).
    reason = scrub(scrub(reason, Quotes(quotes.runs, ())), Quotes(quote_runs(said), ()))
    now = timezone.now()
    type(content).objects.filter(pk=content.pk).update(erased_at=now)
    # (Bytes prune removed already keep the date and reason they went.)
    ReviewMedia.objects.filter(pk=content.pk, removed_at__isnull=True).update(removed_at=now,
                                                                             removed_why=MediaRemoval.ERASURE)
    tombstone = ContentErasure.objects.create(
        content=content, review=review, actor=actor, actor_id=actor_id, reason=reason, erased_at=now,
        stopped_moderation=stopped, redacted=counts,
    )
    # A deferred request is done, and keeps the tombstone's reason, not its own words.
    DeferredErasure.objects.filter(review=review, done_at__isnull=True).update(done_at=now, reason=reason)
    # Its open reports: no moderator will judge them now (report_outcomes), resolved as it is erased.
    resolved = reports_resolve_erased_locked(review, now=now)
    return ErasureReport(review.pk, content.pk, tombstone.erased_at, reason, stopped_moderation=stopped, redacted=counts,
                         reports_resolved=resolved)


def erasures_deferred_run() -> tuple[int, int]:
    """Run the deferred erasures of contents no hold keeps any more, each by `content_erase` in a
    transaction of its own (it asks again under the review's lock): (erased, still held)."""
    pending = DeferredErasure.objects.filter(done_at__isnull=True)
    still_held = pending.filter(held_q(review="review")).count()
    erased = 0
    for deferred in pending.exclude(held_q(review="review")).order_by("pk"):
        report = content_erase(review_id=deferred.review_id, actor=deferred.actor, actor_id=deferred.actor_id,
                               reason=deferred.reason)
        if report.deferred:  # a hold placed since
            still_held += 1
        elif not report.already_erased:
            erased += 1
    return erased, still_held


def _stop_moderation_locked(review: ContentReview, *, actor: str, actor_id: str) -> bool:
    """A review still being moderated ends in manual_review (cause content_erased), its live
    operation closed: a result that still arrives for it is then `already_final`, and a job
    still queued for it finds nothing to do. A review waiting for a human leaves its review queue
    and any moderator's lease: there is nothing left to judge. Call holding the review's row lock."""
    if review.status not in (ReviewStatus.PENDING, ReviewStatus.PROCESSING):
        if review.queue or review.leased_to_id:
            ContentReview.objects.filter(pk=review.pk).update(**review_queue_leave(review))
        return False
    request_close_live_locked(review, why="cancelled: the content was erased")
    review.provider_wait_since = None
    why = "content erased before a decision: nothing is left to moderate"
    decide_locked(
        review, cause=Cause.CONTENT_ERASED, label=ReviewStatus.MANUAL_REVIEW, source=DecisionSource.SYSTEM,
        actor=actor, actor_id=actor_id, transition_reason=why, idempotency_key=review.active_idempotency_key,
        job_id=context.current().get("job_id", ""), update_fields=("provider_wait_since",), reason=why,
        explanation=ERASED_BEFORE_DECISION,
    )
    return True


def _close_appeal_locked(review: ContentReview, *, actor: str, actor_id: str) -> bool:
    """An appeal still open on the review is closed: no review queue offers erased content, so no
    moderator would ever decide it. The appealed rejection stands: a system decision to reject
    again (manual_review -> rejected, cause content_erased) resolves the appeal (`upheld`, the
    contract's outcome for a rejection kept), and the client is told as for any resolved appeal
    (`appeal.resolved`), the explanation saying why. The decision keeps the appealed one's
    policy (the newest when it named none: a moderator's decision before every decision named
    one), category and rule matches (rules, terms and spans), so its reasons stay the same.
    Call holding the review's row lock, in the erasure's transaction."""
    appeal = appeal_open_locked(review)
    if appeal is None:
        return False
    appealed = appeal.decision
    why = f"content erased while appeal {appeal.pk} was open: the appeal is closed and the rejection stands"
    # A moderator's lease on it ends as a decision out of manual_review ends it (review_queue_leave).
    decide_locked(
        review, cause=Cause.CONTENT_ERASED, label=ReviewStatus.REJECTED, source=DecisionSource.SYSTEM,
        actor=actor, actor_id=actor_id, transition_reason=why, job_id=context.current().get("job_id", ""),
        appeal=appeal, reason=why, explanation=ERASED_UNDER_APPEAL, policy=appealed.policy,
        score=appealed.score, category=next((r["category"] for r in reasons(appealed)), ""),
        rule_matches=appealed.rule_matches,
    )
    return True


def _redact(review: ContentReview, quotes: Quotes) -> tuple[dict[str, int], list[str]]:
    """Redact the review's rows of every REDACTED column found from a review: (rows changed per
    column, the words replaced whole)."""
    keys = list(ModerationRequest.objects.filter(review=review).values_list("idempotency_key", flat=True))
    entries = [entry for entry in REDACTED if entry.review or entry.key]
    return _redact_entries(entries, lambda entry: {f"{entry.key}__in": keys} if entry.key else {entry.review: review.pk},
                           quotes)


def _author_words_erase(author_pk: int, *, for_real: bool) -> dict[str, int]:
    """Replace the words of the author's own record (REDACTED's `author` entries) in one
    transaction holding the author's row lock, the lock every writer of that record holds
    (moderation/services/authors.py). Not called holding a review's lock: reviews come first.
    Its contents are erased already, so there is nothing left to quote: only the words go."""
    entries = [entry for entry in REDACTED if entry.author]
    try:
        with transaction.atomic():
            Author.objects.select_for_update().filter(pk=author_pk).first()
            counts, _ = _redact_entries(entries, lambda entry: {entry.author: author_pk}, Quotes(frozenset(), ()))
            if not for_real:
                raise _DryRun(counts)
    except _DryRun as dry:
        counts = dry.args[0]
    return counts


def _redact_entries(entries: list[Redact], lookup: Callable[[Redact], dict], quotes: Quotes
                    ) -> tuple[dict[str, int], list[str]]:
    counts: dict[str, int] = {}
    said: list[str] = []
    with connection.cursor() as cursor:
        # The append-only logs' one sanctioned change (audit migration 0004, moderation 0009): a
        # row's `reason` (a note's `text`), only inside a transaction that declared itself so.
        cursor.execute("SET LOCAL moderation.erasure = 'on'")
        try:
            for entry in entries:
                model = apps.get_model(entry.model)
                rows = model.objects.filter(**lookup(entry))
                changed = _redact_rows(rows, entry, quotes, said)
                try:
                    history = get_history_model_for_model(model)
                except NotHistoricalModelError:
                    history = None
                if history is not None:
                    pks = rows.values_list("pk", flat=True)
                    changed += _redact_rows(history.objects.filter(**{f"{model._meta.pk.attname}__in": pks}), entry,
                                            quotes, said)
                if changed:  # (a column found by two paths counts both)
                    name = f"{entry.model}.{entry.field}"
                    counts[name] = counts.get(name, 0) + changed
        finally:
            cursor.execute("SET LOCAL moderation.erasure = 'off'")
    return counts, said


def _redact_rows(rows, entry: Redact, quotes: Quotes, said: list[str]) -> int:
    """Redact `entry`'s column in `rows`; the texts replaced whole are added to `said`."""
    model_field = rows.model._meta.get_field(entry.field)
    changed = 0
    # (Each path reaches a row once: a review's own rows, its author's, a job's one item per review.)
    for pk, value in rows.values_list("pk", entry.field):
        new = _redacted_value(value, entry.how, model_field, quotes)
        if new != value:
            rows.model.objects.filter(pk=pk).update(**{entry.field: new})
            changed += 1
            if entry.how is How.WHOLE:  # (a body's words, WORDS, are copies of these columns)
                said.append(value)
    return changed


def _redacted_value(value, how: How, model_field, quotes: Quotes):
    if value in (None, "", {}, []):
        return value
    if how is How.CLEAR:
        return _empty(model_field)
    if how is How.CALLBACK:
        return redacted_callback(value, lambda text: scrub(text, quotes))
    if how is How.WHOLE:
        return ERASED
    if how is How.WORDS:
        body = _body(value)
        if body is None:  # text that is no body: nothing in it can be told apart from words
            return ERASED
        body = scrub(words_erased(body), quotes)
        return outbox_payload(body) if isinstance(value, str) else body
    if how is How.MATCHES:  # rows written before matches stopped keeping the words as written
        return [{k: v for k, v in match.items() if k != "matched"} for match in value]
    return scrub(value, quotes)


def _body(value):
    """A stored body as data: JSON text (a notification's payload) parsed, data as it is; None
    for a text that is not JSON."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return None


def _empty(model_field):
    """What a cleared column holds: {} for JSON, NULL where allowed (bytes, a width), else the
    field's default ("" for text, 0 for a size)."""
    if isinstance(model_field, models.JSONField):
        return {}
    if model_field.null:
        return None
    return model_field.get_default()


def _quoted_matches(review: ContentReview) -> set[str]:
    """The words rules matched, as explanations written before issue 22 quoted them (`matched
    "<words>"`, in the decision's explanation, the transition's reason and the payload): those
    rows kept the words in their stored matches. A matched word may be shorter than QUOTE_MIN, so
    it is looked for in its quoted form only, which no other text of the review's rows holds."""
    stored = Decision.objects.filter(review=review).values_list("rule_matches", flat=True)
    return {f'"{match["matched"]}"' for matches in stored for match in matches or ()
            if isinstance(match, dict) and isinstance(match.get("matched"), str) and match["matched"].strip()}
