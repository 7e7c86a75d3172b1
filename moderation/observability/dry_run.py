"""A dry run of a draft policy: what it would decide, beside the active version, with no write.

Pasted texts are judged by the local model when it is the configured provider (it runs in
process); a remote provider is never called from a dry run, so those rows show rules only. The
last N reviews reuse the scores their provider decision stored, so the comparison is exact.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.conf import settings

from moderation.language import Detection, detect_many
from moderation.models import Decision, DecisionSource, ModerationPolicy
from moderation.verdicts import Verdict, decide, rule_text
from moderation.providers import ModerationInput, ModerationResult, ProviderError, get_provider

MAX_TEXTS = 200
MAX_REVIEWS = 500
_NO_SCORES = ModerationResult(model="", flagged=False, categories={}, category_scores={})


@dataclass(frozen=True)
class DryRunRow:
    text: str
    review_id: uuid.UUID | None
    detection: Detection
    active: Verdict
    draft: Verdict
    note: str = ""  # why the model's scores are missing, when they are

    @property
    def changed(self) -> bool:
        return self.active.label != self.draft.label


def policy_dry_run(*, draft: ModerationPolicy, active: ModerationPolicy, texts=(), last: int = 0) -> list[DryRunRow]:
    """Rows for each pasted text and each of the last `last` provider decisions.

    Reviews reuse the language their worker detected; the texts that have none are detected in
    one batch (`detect_many`: a web worker does not hold the detector, moderation/language.py).
    """
    texts = list(texts)[:MAX_TEXTS]
    decisions = list(
        Decision.objects.filter(source=DecisionSource.PROVIDER)
        .select_related("review__content")
        .order_by("-id")[: min(last, MAX_REVIEWS)]
    )
    undetected = [rule_text(d.review.content) for d in decisions if d.review.content.language_candidates is None]
    detections = iter(detect_many(texts + undetected))
    rows = [_row(draft, active, text, None, next(detections), *_model_result(text)) for text in texts]
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
        rows.append(_row(draft, active, rule_text(content), decision.review_id, detection, result, ""))
    return rows


def _row(draft, active, text, review_id, detection, result, note) -> DryRunRow:
    return DryRunRow(
        text=text, review_id=review_id, detection=detection, note=note,
        active=decide(active, result, text=text, detection=detection),
        draft=decide(draft, result, text=text, detection=detection),
    )


def _model_result(text: str) -> tuple[ModerationResult, str]:
    if settings.MODERATION_PROVIDER != "local":
        return _NO_SCORES, f"the {settings.MODERATION_PROVIDER} provider is not called by a dry run: rules only"
    try:
        result = get_provider("local").moderate(
            ModerationInput(idempotency_key=str(uuid.uuid4()), content_type="text", text=text)
        )
    except ProviderError as exc:
        return _NO_SCORES, f"the local model failed: {exc}"
    return result, ""
