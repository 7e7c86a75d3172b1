"""Shadow runs: a policy version (a draft, or the active one with another provider) judging live
traffic beside the active version, acting on nothing (docs/quality.md, "Shadow runs").

The live path does not know a shadow exists: nothing is added to a submission, a dispatch or a
finalize. A scheduled task on the notification cluster (`moderation.tasks.quality_minute`, every minute) takes, per
live shadow, the provider decisions made since its cursor (settled: QUALITY_SETTLE_S old), judges their texts with the shadow's
policy and provider, and writes one verdict each to its own table, then moves the cursor. A
batch is taken under a lease on the shadow's row (taken FOR UPDATE SKIP LOCKED, so two clusters
never judge one batch twice); no lock or transaction is held while the provider judges. A shadow whose provider raises, hangs until its timeout or answers garbage records the
error on its verdicts and its row; the live decisions were made and sent before it ever ran.

Agreement is measured with the live decision (the same label) and with a moderator's decision in
force where there is one (approved against approved, rejected against anything but approved).
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from datetime import date

from django.db import connection, transaction
from django.db.models import F, Max, Q
from django.utils import timezone

from moderation.errors import NotApplicable
from moderation.models import (
    ContentKind,
    Decision,
    DecisionSource,
    ModerationPolicy,
    ReviewStatus,
    ShadowRun,
    ShadowVerdict,
)
from moderation.observability.evaluation import (
    NONE,
    Answered,
    EvaluationError,
    Example,
    examples_decide,
    examples_detect,
    inline_provider,
)
from moderation.quality.alarms import settled_before
from moderation.quality.replay import QUALITY_LEASE, AnswerCount, answer_model, kept_answers
from moderation.verdicts import rule_text

logger = logging.getLogger(__name__)

SHADOW_BATCH = 1_000  # provider decisions judged per transaction
SHADOW_SLICE_S = 20.0  # at most this long per scheduled run (then the next minute's run goes on)


def shadow_start(*, policy: ModerationPolicy, provider_name: str, user) -> ShadowRun:
    """Put `policy` with `provider_name` in shadow from now on (decisions made before are left
    to backtests). NotApplicable if the same pair is already in shadow, or the provider cannot
    judge here (one that answers by callback)."""
    try:
        inline_provider(provider_name)
    except EvaluationError as exc:
        raise NotApplicable(str(exc)) from None
    with transaction.atomic():
        if ShadowRun.objects.select_for_update().filter(policy=policy, provider=provider_name,
                                                        stopped_at__isnull=True).exists():
            raise NotApplicable(f"{policy} with the {provider_name} provider is already in shadow")
        cursor = Decision.objects.filter(source=DecisionSource.PROVIDER).aggregate(m=Max("id"))["m"] or 0
        shadow = ShadowRun.objects.create(policy=policy, provider=provider_name, started_by=user, cursor=cursor)
    logger.info("shadow %s started by %s: %s with %s", shadow.pk, user, policy, provider_name)
    return shadow


def shadow_stop(*, shadow_id: int, user) -> ShadowRun:
    with transaction.atomic():
        shadow = ShadowRun.objects.select_for_update().get(pk=shadow_id)
        if shadow.stopped_at is not None:
            raise NotApplicable("this shadow run has stopped already")
        shadow.stopped_at = timezone.now()
        shadow.save(update_fields=["stopped_at"])
    logger.info("shadow %s stopped by %s", shadow_id, user)
    return shadow


def shadows_run(*, deadline: float) -> int:
    """Judge what every live shadow has not judged yet, until `deadline`. Returns the verdicts
    written. A shadow another worker holds is skipped (it is being judged)."""
    written = 0
    for shadow_id in ShadowRun.objects.filter(stopped_at__isnull=True).order_by("pk").values_list("pk", flat=True):
        while time.monotonic() < deadline:
            done = _judge_batch(shadow_id)
            written += done
            if done < SHADOW_BATCH:
                break
    return written


def _judge_batch(shadow_id: int) -> int:
    """Judge the next batch of one shadow, in three steps, as dispatch does (docs/design.md,
    invariant 6): take the batch's lease (a transaction), judge (none: the provider may be a server
    across the network, and may hang until its timeout), write the verdicts and move the cursor if
    the lease is still this worker's (a transaction). Returns the decisions judged."""
    lease, now = uuid.uuid4(), timezone.now()
    with transaction.atomic():
        # of=self: the shadow's row only, never its policy's (every live decision's foreign key
        # takes that one FOR KEY SHARE at commit: the shadow would hold them all up).
        shadow = (ShadowRun.objects.select_for_update(skip_locked=True, of=("self",)).select_related("policy")
                  .filter(Q(leased_until__isnull=True) | Q(leased_until__lt=now), pk=shadow_id,
                          stopped_at__isnull=True)
                  .first())
        if shadow is None:
            return 0  # stopped, or another worker holds its batch
        decisions = list(Decision.objects.filter(source=DecisionSource.PROVIDER, id__gt=shadow.cursor,
                                                 created_at__lt=settled_before(now))
                         .select_related("review__content").order_by("id")[:SHADOW_BATCH])
        if not decisions:
            return 0
        ShadowRun.objects.filter(pk=shadow.pk).update(lease=lease, leased_until=now + QUALITY_LEASE)
    texts = [d for d in decisions if d.review.content.kind in (ContentKind.TEXT, ContentKind.METADATA)
             and d.review.content.erased_at is None]
    verdicts, error = [], ""
    try:
        verdicts = _verdicts(shadow, texts)
    except Exception as exc:  # noqa: BLE001 - a shadow's failure is recorded, never raised into the schedule
        error = f"{type(exc).__name__}: {exc}"[:2000]
        logger.warning("shadow %s: its provider failed on %s decisions: %s", shadow.pk, len(texts), error)
        verdicts = [ShadowVerdict(shadow=shadow, review_id=d.review_id, decision=d.pk, live_label=d.label,
                                  label=ReviewStatus.MANUAL_REVIEW, error=error,
                                  language=d.review.content.language) for d in texts]
    with transaction.atomic():
        if not ShadowRun.objects.select_for_update(of=("self",)).filter(pk=shadow.pk, lease=lease).exists():
            # The lease ran out and another worker took the batch over: its verdicts count.
            logger.warning("shadow %s: a batch outlived its lease; its verdicts were dropped", shadow.pk)
            return 0
        ShadowVerdict.objects.bulk_create(verdicts, ignore_conflicts=True, batch_size=1000)
        failed = sum(1 for v in verdicts if v.error)
        ShadowRun.objects.filter(pk=shadow.pk).update(
            cursor=decisions[-1].pk, judged=F("judged") + len(verdicts), errors=F("errors") + failed,
            last_error=error or next((v.error for v in verdicts if v.error), shadow.last_error),
            lease=None, leased_until=None)
    return len(decisions)


def _verdicts(shadow: ShadowRun, decisions: list[Decision]) -> list[ShadowVerdict]:
    provider = inline_provider(shadow.provider)
    examples = [Example(row=i + 1, line=i + 1, text=rule_text(d.review.content), label=False)
                for i, d in enumerate(decisions)]
    count = AnswerCount()
    answers = kept_answers([e.text for e in examples], provider=provider, policy=shadow.policy,
                           model=answer_model(shadow.provider, provider, shadow.policy), count=count)
    judged = examples_decide(examples, Answered(examples_detect(examples), answers), policy=shadow.policy,
                             provider_name=shadow.provider)
    return [ShadowVerdict(shadow=shadow, review_id=d.review_id, decision=d.pk, live_label=d.label,
                          label=j.outcome.value, category=j.category, score=j.score, error=j.error[:2000],
                          language=d.review.content.language)
            for d, j in zip(decisions, judged, strict=True)]


# --- what the shadow's page shows ----------------------------------------------------------------

@dataclass(frozen=True)
class AgreementRow:
    day: date
    category: str
    judged: int
    agree_live: int
    human: int  # of those, decided by a moderator (approved or rejected)
    agree_human: int

    @property
    def live_share(self) -> str:
        return f"{100 * self.agree_live / self.judged:.1f}%" if self.judged else "—"

    @property
    def human_share(self) -> str:
        return f"{100 * self.agree_human / self.human:.1f}%" if self.human else "—"


def shadow_agreement(shadow: ShadowRun, *, days: int = 14) -> list[AgreementRow]:
    """Per day (UTC) and category (the shadow's deciding one, else the live decision's, else
    "(none)"), newest day first: verdicts, agreement with the live decision, and with a moderator's
    approval or rejection in force. One grouped query."""
    verdict, decision, review = (ShadowVerdict._meta.db_table, Decision._meta.db_table,
                                 "moderation_contentreview")
    sql = f"""
        SELECT (v.created_at AT TIME ZONE 'UTC')::date AS day,
               COALESCE(NULLIF(v.category, ''), NULLIF(live.category, ''), %s) AS category,
               count(*), count(*) FILTER (WHERE v.label = v.live_label),
               count(h.id), count(h.id) FILTER (WHERE (h.label = 'approved') = (v.label = 'approved'))
        FROM {verdict} v
        LEFT JOIN {decision} live ON live.id = v.decision
        LEFT JOIN {review} r ON r.id = v.review_id
        LEFT JOIN {decision} h ON h.id = r.decision_id AND h.source = 'moderator' AND h.label IN ('approved', 'rejected')
        WHERE v.shadow_id = %s AND v.created_at >= now() - make_interval(days => %s)
        GROUP BY 1, 2 ORDER BY 1 DESC, 2"""
    with connection.cursor() as cursor:
        cursor.execute(sql, [NONE, shadow.pk, days])
        return [AgreementRow(*row) for row in cursor.fetchall()]


def shadow_disagreements(shadow: ShadowRun):
    """The verdicts that differ from the live decision, newest first (a queryset, to page)."""
    return shadow.verdicts.exclude(label=F("live_label")).order_by("-created_at", "-id")
