"""A dry run of a draft policy: what it would decide, beside the active version, with no write.

Pasted texts are judged by the local model when it is the configured provider (it runs in
process), in one call over all of them (`model_results`, which `manage.py evaluate_policy` calls
too: moderation/observability/evaluation.py); a remote provider is never called from a dry run,
so those rows show rules only. The last N reviews reuse the scores their provider decision
stored, so the comparison is exact.

The summary (`dry_run_summary`) says how many of those reviews' verdicts the draft changes, from
what to what, and how often the draft and the active version agree with what moderators decided
on them (docs/workplace.md, "The term editor").
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass

from django.conf import settings
from django.db.models import Exists, OuterRef

from moderation.text.language import Detection, detect_many
from moderation.models import Decision, DecisionSource, ModerationPolicy, ReviewStatus
from moderation.selectors import visible_to
from moderation.verdicts import Verdict, decide, rule_text
from moderation.providers import (
    Accepted, ModerationInput, ModerationResult, ProviderError, get_provider, provider_reads_policy,
)
from moderation.services.policy import policy_active

MAX_TEXTS = 200
MAX_REVIEWS = 500
# Texts per call of a provider that judges many at once: 10,000 texts in 20 calls of the local
# model, each a few hundred milliseconds.
MODEL_CALL_TEXTS = 500
_NO_SCORES = ModerationResult(model="", flagged=False, categories={}, category_scores={})


@dataclass(frozen=True)
class DryRunRow:
    text: str
    review_id: uuid.UUID | None
    detection: Detection
    active: Verdict
    draft: Verdict
    note: str = ""  # why the model's scores are missing, when they are
    # What a moderator decided on the review, when the decision in force is a moderator's
    # approval or rejection ("" otherwise: a pasted text, a provider's decision, an escalation).
    moderator: str = ""

    @property
    def changed(self) -> bool:
        return self.active.label != self.draft.label

    @property
    def draft_agrees(self) -> bool:
        return self.draft.label == self.moderator

    @property
    def active_agrees(self) -> bool:
        return self.active.label == self.moderator


# A moderator's judgement of the content: an escalation (manual_review) judges nothing.
JUDGEMENTS = (ReviewStatus.APPROVED, ReviewStatus.REJECTED)


@dataclass(frozen=True)
class DryRunSummary:
    """What the draft changes over `judged` rows, and its agreement with moderators."""

    judged: int  # M: the rows re-judged
    changed: int  # N: those whose verdict the draft changes
    changes: tuple[tuple[str, str, int], ...]  # (active's label, draft's label, how many), most first
    decided_by_moderators: int  # Y: the rows whose decision in force is a moderator's judgement
    draft_agrees: int  # X: of those, the draft's verdict is the moderator's
    active_agrees: int  # X0: the active version's verdict is the moderator's
    disagreements: tuple[DryRunRow, ...]  # the rows of Y the draft decides otherwise


def dry_run_summary(rows: list[DryRunRow]) -> DryRunSummary:
    changes = Counter((row.active.label, row.draft.label) for row in rows if row.changed)
    decided = [row for row in rows if row.moderator]
    return DryRunSummary(
        judged=len(rows), changed=sum(changes.values()),
        changes=tuple((was, now, n) for (was, now), n in sorted(changes.items(), key=lambda c: (-c[1], c[0]))),
        decided_by_moderators=len(decided),
        draft_agrees=sum(row.draft_agrees for row in decided),
        active_agrees=sum(row.active_agrees for row in decided),
        disagreements=tuple(row for row in decided if not row.draft_agrees),
    )


def policy_dry_run(*, draft: ModerationPolicy, active: ModerationPolicy, texts=(), last: int = 0,
                   viewer=None) -> list[DryRunRow]:
    """Rows for each pasted text, then for each of the last `last` reviews a provider decided
    (each review once, by its newest provider decision: a reprocessed review is one review), of
    those `viewer` may see (every one when None: moderation.selectors.visible_to).

    Reviews reuse the language their worker detected; the texts that have none are detected in
    one batch (`detect_many`: a web worker does not hold the detector, moderation/text/language.py).
    """
    texts = list(texts)[:MAX_TEXTS]
    newer = Decision.objects.filter(review=OuterRef("review"), source=DecisionSource.PROVIDER, id__gt=OuterRef("id"))
    decisions = list(
        visible_to(viewer, Decision.objects.filter(source=DecisionSource.PROVIDER), through="review")
        .filter(~Exists(newer))
        .select_related("review__content", "review__decision")
        .order_by("-id")[: min(last, MAX_REVIEWS)]
    )
    undetected = [rule_text(d.review.content) for d in decisions if d.review.content.language_candidates is None]
    detections = iter(detect_many(texts + undetected))
    rows = [_row(draft, active, text, None, next(detections), *answer)
            for text, answer in zip(texts, _model_results(texts), strict=True)]
    for decision in decisions:
        content = decision.review.content
        detection = (
            Detection(content.language, tuple((c, v) for c, v in content.language_candidates))
            if content.language_candidates is not None
            else next(detections)
        )
        result = ModerationResult(
            model=decision.model, flagged=bool(decision.flagged),
            categories=decision.categories, category_scores=decision.category_scores,
        )
        in_force = decision.review.decision
        moderator = (in_force.label if in_force is not None and in_force.source == DecisionSource.MODERATOR
                     and in_force.label in JUDGEMENTS else "")
        rows.append(_row(draft, active, rule_text(content), decision.review_id, detection, result, "", moderator))
    return rows


def _row(draft, active, text, review_id, detection, result, note, moderator="") -> DryRunRow:
    return DryRunRow(
        text=text, review_id=review_id, detection=detection, note=note, moderator=moderator,
        active=decide(active, result, text=text, detection=detection),
        draft=decide(draft, result, text=text, detection=detection),
    )


def _model_results(texts: list[str]) -> list[tuple[ModerationResult, str]]:
    """(result, note) for each pasted text: the local model's scores, or none and why."""
    if settings.MODERATION_PROVIDER != "local":
        note = f"the {settings.MODERATION_PROVIDER} provider is not called by a dry run: rules only"
        return [(_NO_SCORES, note)] * len(texts)
    return [(answer, "") if isinstance(answer, ModerationResult) else (_NO_SCORES, f"the local model failed: {answer}")
            for answer in model_results(texts, provider=get_provider("local"))]


def model_results(texts: list[str], *, provider, policy=None) -> list[ModerationResult | Accepted | ProviderError]:
    """`provider`'s answer for each text, in order, judged as the text of a submitted content is
    (content type "text", a fresh idempotency key each). A provider that judges by the policy's
    written definitions (the `llm` provider) is given `policy`'s (None: the version in force), so
    two versions' wordings can be measured on the same texts. A provider that judges many inputs at
    once (`moderate_many`, the local model) gets one call per MODEL_CALL_TEXTS texts, as a batch
    of reviews does (docs/design.md, "Batches"); any other, one call per text. A text's error
    (content it cannot judge, a timeout) stands in its slot, as a batch keeps it; a model that
    cannot run at all raises. Writes no database (and reads it only for the version in force)."""
    prompt = {}
    if provider_reads_policy(provider):
        policy = policy or policy_active()
        prompt = {"category_definitions": dict(policy.category_definitions), "policy_version": policy.version}
    inputs = [ModerationInput(idempotency_key=str(uuid.uuid4()), content_type="text", text=text, **prompt)
              for text in texts]
    many = getattr(provider, "moderate_many", None)
    if many is not None:
        return [answer for start in range(0, len(inputs), MODEL_CALL_TEXTS)
                for answer in many(inputs[start:start + MODEL_CALL_TEXTS])]
    answers: list[ModerationResult | Accepted | ProviderError] = []
    for request in inputs:
        try:
            answers.append(provider.moderate(request))
        except ProviderError as exc:
            answers.append(exc)
        except Exception as exc:  # noqa: BLE001 - a bug in an adapter is this text's error, as dispatch keeps it
            answers.append(ProviderError.unexpected(exc))
    return answers
