"""Erasure that keeps the audit chain (docs/design.md, invariant 16; GDPR Art. 17 with DSA
record-keeping).

A client (`DELETE /api/v1/reviews/{id}/content`) or an operator (`manage.py erase_content`)
erases a content. Every column that holds it, or may quote it, is redacted; the review, its
transitions, decisions, operations, inbox keys and every id stay, and a tombstone
(`ContentErasure`) says who erased it, when and why. A review still being moderated is stopped
first, under its row lock, so no provider is called with erased content after the erasure
commits (dispatch also refuses erased content, whatever the review's state).

`REDACTED` is the one list of the columns that hold content. A new column that can hold a
user's words (a report's detail, an appeal's statement, a notification's payload...) is one
line here; the test that erases a content then searches every text column of the database for
what it erased, so a column missing here fails it. Copies kept by django-simple-history of a
listed model are redacted with it.

Nothing the platform writes quotes what a rule matched (explanations, transition reasons and
notifications name the rule, the policy's term and the span: moderation.verdicts), so the quotes
left to find are those of providers (errors, callback bodies): a run of QUOTE_MIN characters of
the content anywhere in them. People's own words about the content (a report's detail, an
appeal's statement, a moderator's note) can quote it at any length: they are replaced whole.
An appeal still open on the content is closed in the same transaction (`_close_appeal_locked`).

An image's bytes go at once, with what was read of them (sha256, type, size); its PDQ hash and
quality stay, as a bank match's evidence. The job never stores bytes it fetched for a content
erased meanwhile (moderation/services/media.py checks under the review's lock).

An author's strikes and account actions outlive the erasure of the author's content as facts
(a strike's category and points, an action, its reason and the strikes it rested on): only a quote
of the erased content in them goes. `author_content_erase` erases every content of one author,
each review by `content_erase`, so each keeps every guarantee above.
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
    Cause,
    ContentErasure,
    ContentReview,
    Decision,
    DecisionSource,
    MediaRemoval,
    ModerationRequest,
    ReviewMedia,
    ReviewStatus,
)
from moderation.providers.base import text_values
from moderation.reasons import reasons
from moderation.services.appeals import appeal_open_locked
from moderation.services.decide import decide_locked
from moderation.services.pipeline import request_close_live_locked
from moderation.services.report_outcomes import reports_resolve_erased_locked
from moderation.services.transitions import review_queue_leave

# A run of this many characters of the content, anywhere in other text, is a quote of it (an
# error body echoing the input, cut at either end). Shorter texts are looked for whole.
QUOTE_MIN = 16
# Metadata values shorter than this are not looked for inside other text (a "en" or a "1" would
# match everywhere); the metadata itself is cleared whatever its size.
METADATA_MIN_QUOTE = 4
REASON_MAX_CHARS = 2000
# What the client reads of the system decisions erasure makes (moderation.reasons shows a system
# decision's explanation as written: it is the platform's own text, never a provider's error).
ERASED_BEFORE_DECISION = "The content was erased before a decision: nothing is left to moderate."
ERASED_UNDER_APPEAL = ("The content was erased while its appeal was open: nothing is left to judge, so the "
                       "appeal is closed and the rejection stands.")


class How(enum.StrEnum):
    CLEAR = "clear"  # the column is the content, or read from it: emptied ("", {}, NULL or its default)
    QUOTES = "quotes"  # free text that may quote it (errors, reasons, payloads): each quote replaced
    WHOLE = "whole"  # people's words about it (reports, appeals, notes): replaced whole, a quote can be any length
    CALLBACK = "callback"  # a provider's raw callback body: cut to the protocol's ids and scores
    MATCHES = "matches"  # a decision's rule matches: rule, term and span stay; words as written (old rows) go


@dataclass(frozen=True)
class Redact:
    """One column to redact: `model` ("app.Model") and `field`, and how its rows are found,
    either `review` (the ORM path from the model to the review) or `key` (a column holding the
    idempotency key of one of the review's operations)."""

    model: str
    field: str
    how: How = How.QUOTES
    review: str = ""
    key: str = ""


REDACTED: tuple[Redact, ...] = (
    Redact("moderation.Content", "text", How.CLEAR, review="review"),
    Redact("moderation.Content", "media_url", How.CLEAR, review="review"),
    Redact("moderation.Content", "metadata", How.CLEAR, review="review"),
    Redact("moderation.ModerationRequest", "last_error", review="review"),
    Redact("moderation.ProviderAttempt", "error", review="request__review"),
    Redact("moderation.Decision", "reason", review="review"),
    Redact("moderation.Decision", "explanation", review="review"),
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
    Redact("moderation.DecisionNotification", "payload", review="review"),
    Redact("moderation.DecisionNotification", "last_error", review="review"),
    Redact("moderation.NotificationAttempt", "error", review="notification__review"),
    Redact("moderation.Report", "detail", How.WHOLE, review="review"),
    Redact("moderation.Appeal", "statement", How.WHOLE, review="review"),
    # Append-only like the transition log, with the same sanctioned path (migration 0009).
    Redact("moderation.ModeratorNote", "text", How.WHOLE, review="review"),
    Redact("audit.ReviewTransition", "reason", review="review"),
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
    Redact("audit.PipelineEvent", "detail", review="review"),
    # Statements of reasons (docs/transparency.md) carry the policy's wording and enumerations,
    # never the content: only a quote of it (a category key a provider echoed) would go.
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
            if not report.already_erased:
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
    last one read (reviews in id order, which is time order)."""
    reason = reason.strip()
    if not reason or len(reason) > REASON_MAX_CHARS:
        raise ValueError(f"a reason is required (at most {REASON_MAX_CHARS} characters)")
    reviews = ContentReview.objects.filter(author_id=author_pk)
    report = AuthorErasureReport(author_pk, reason, for_real=for_real,
                                 already_erased=reviews.filter(content__erased_at__isnull=False).count())
    left = reviews.filter(content__erased_at__isnull=True).order_by("pk")
    after, stopped = None, False
    while not stopped and (limit is None or report.erased < limit):
        batch = left.filter(pk__gt=after) if after is not None else left  # a dry run erases nothing: move on
        size = _AUTHOR_BATCH if limit is None else min(_AUTHOR_BATCH, limit - report.erased)
        ids = list(batch.values_list("pk", flat=True)[:size])
        for review_id in ids:
            erased = content_erase(review_id=review_id, actor=actor, actor_id=actor_id, reason=reason,
                                   for_real=for_real)
            after = review_id
            if erased.already_erased:  # by someone else since the batch was read
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
    return report


def _erase_locked(review_id, *, actor: str, actor_id: str, reason: str) -> ErasureReport:
    review = (
        ContentReview.objects.select_for_update(of=("self",))
        .select_related("content", "client")
        .filter(pk=review_id)
        .first()
    )
    if review is None:
        raise NotFound(f"no review with id {review_id}")
    content = review.content
    if content.erased_at is not None:
        tombstone = content.erasure
        return ErasureReport(review.pk, content.pk, tombstone.erased_at, tombstone.reason, already_erased=True,
                             stopped_moderation=tombstone.stopped_moderation, redacted=tombstone.redacted,
                             appeal_closed=_close_appeal_locked(review, actor=actor, actor_id=actor_id),
                             reports_resolved=reports_resolve_erased_locked(review, now=timezone.now()))
    quotes = content_quotes(content, also=_quoted_matches(review))
    _close_appeal_locked(review, actor=actor, actor_id=actor_id)
    stopped = _stop_moderation_locked(review, actor=actor, actor_id=actor_id)
    counts = _redact(review, quotes)
    now = timezone.now()
    type(content).objects.filter(pk=content.pk).update(erased_at=now)
    # (Bytes prune removed already keep the date and reason they went.)
    ReviewMedia.objects.filter(pk=content.pk, removed_at__isnull=True).update(removed_at=now,
                                                                             removed_why=MediaRemoval.ERASURE)
    tombstone = ContentErasure.objects.create(
        content=content, review=review, actor=actor, actor_id=actor_id, reason=reason, erased_at=now,
        stopped_moderation=stopped, redacted=counts,
    )
    # Its open reports: no moderator will judge them now (report_outcomes), resolved as it is erased.
    resolved = reports_resolve_erased_locked(review, now=now)
    return ErasureReport(review.pk, content.pk, tombstone.erased_at, reason, stopped_moderation=stopped, redacted=counts,
                         reports_resolved=resolved)


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


def _redact(review: ContentReview, quotes: Quotes) -> dict[str, int]:
    keys = list(ModerationRequest.objects.filter(review=review).values_list("idempotency_key", flat=True))
    counts: dict[str, int] = {}
    with connection.cursor() as cursor:
        # The transition log's one sanctioned change (audit migration 0004): a quote in `reason`.
        cursor.execute("SET LOCAL moderation.erasure = 'on'")
        try:
            for entry in REDACTED:
                model = apps.get_model(entry.model)
                lookup = {f"{entry.key}__in": keys} if entry.key else {entry.review: review.pk}
                rows = model.objects.filter(**lookup)
                changed = _redact_rows(rows, entry, quotes)
                try:
                    history = get_history_model_for_model(model)
                except NotHistoricalModelError:
                    history = None
                if history is not None:
                    pks = rows.values_list("pk", flat=True)
                    changed += _redact_rows(history.objects.filter(**{f"{model._meta.pk.attname}__in": pks}), entry, quotes)
                if changed:  # (a column found by two paths counts both)
                    name = f"{entry.model}.{entry.field}"
                    counts[name] = counts.get(name, 0) + changed
        finally:
            cursor.execute("SET LOCAL moderation.erasure = 'off'")
    return counts


def _redact_rows(rows, entry: Redact, quotes: Quotes) -> int:
    model_field = rows.model._meta.get_field(entry.field)
    changed = 0
    for pk, value in rows.values_list("pk", entry.field):
        new = _redacted_value(value, entry.how, model_field, quotes)
        if new != value:
            rows.model.objects.filter(pk=pk).update(**{entry.field: new})
            changed += 1
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
    if how is How.MATCHES:  # rows written before matches stopped keeping the words as written
        return [{k: v for k, v in match.items() if k != "matched"} for match in value]
    return scrub(value, quotes)


def _empty(model_field):
    """What a cleared column holds: {} for JSON, NULL where allowed (bytes, a width), else the
    field's default ("" for text, 0 for a size)."""
    if isinstance(model_field, models.JSONField):
        return {}
    if model_field.null:
        return None
    return model_field.get_default()


@dataclass(frozen=True)
class Quotes:
    """What to look for in other columns: every QUOTE_MIN-character run of the longer texts
    (`runs`), and the shorter ones whole, longest first (`whole`)."""

    runs: frozenset[str]
    whole: tuple[str, ...]


def _quoted_matches(review: ContentReview) -> set[str]:
    """The words rules matched, as explanations written before issue 22 quoted them (`matched
    "<words>"`, in the decision's explanation, the transition's reason and the payload): those
    rows kept the words in their stored matches. A matched word may be shorter than QUOTE_MIN, so
    it is looked for in its quoted form only, which no other text of the review's rows holds."""
    stored = Decision.objects.filter(review=review).values_list("rule_matches", flat=True)
    return {f'"{match["matched"]}"' for matches in stored for match in matches or ()
            if isinstance(match, dict) and isinstance(match.get("matched"), str) and match["matched"].strip()}


def content_quotes(content, also=()) -> Quotes:
    """The quotes of the text, the media URL and the metadata's values (and `also`), each as
    written and as it appears inside JSON (escaped, with and without \\u escapes)."""
    found = {content.text, content.media_url, *also}
    found.update(s for s in text_values(content.metadata) if len(s) >= METADATA_MIN_QUOTE)
    forms = set()
    for s in found:
        if s and s.strip():
            forms.update({s, json.dumps(s)[1:-1], json.dumps(s, ensure_ascii=False)[1:-1]})
    runs = frozenset(form[i:i + QUOTE_MIN] for form in forms for i in range(len(form) - QUOTE_MIN + 1))
    return Quotes(runs, tuple(sorted((f for f in forms if len(f) < QUOTE_MIN), key=len, reverse=True)))


def scrub(value, quotes: Quotes):
    """`value` (text, or JSON-like data) with every quote of `quotes` replaced by ERASED."""
    if isinstance(value, str):
        value = _replace_runs(value, quotes.runs)
        for quote in quotes.whole:
            value = value.replace(quote, ERASED)
        return value
    if isinstance(value, list):
        return [scrub(item, quotes) for item in value]
    if isinstance(value, dict):
        return {scrub(k, quotes): scrub(v, quotes) for k, v in value.items()}
    return value


def _replace_runs(text: str, runs: frozenset[str]) -> str:
    """`text` with each stretch covered by runs of the content replaced by one ERASED: a quote
    of any length (at least QUOTE_MIN), from anywhere in the content, cut anywhere."""
    stretches: list[list[int]] = []  # [start, end) of each stretch to replace
    for i in range(len(text) - QUOTE_MIN + 1) if runs else ():
        if text[i:i + QUOTE_MIN] in runs:
            if stretches and i <= stretches[-1][1]:
                stretches[-1][1] = i + QUOTE_MIN
            else:
                stretches.append([i, i + QUOTE_MIN])
    if not stretches:
        return text
    parts, pos = [], 0
    for start, end in stretches:
        parts += [text[pos:start], ERASED]
        pos = end
    return "".join([*parts, text[pos:]])
