"""A policy version replayed over what people already decided (docs/quality.md, "Backtests").

Every approval or rejection a moderator made is a label: a rejection says the content should not
have been approved, an approval that it should. A backtest turns the reviews a moderator decided
(the decision in force, text and metadata content not erased) into `evaluate_policy`'s labelled
examples, judges them with the candidate and with the active version from one set of provider
answers, and measures both with `evaluate_policy`'s figures (moderation/observability/
evaluation.py): the same function on the same examples gives the same numbers, whichever command
asked.

Provider answers are kept (`ProviderAnswer`): the same text, judged by the same model and model
version, is not asked again by a later backtest or shadow run. Nothing here writes to a review.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.transaction import TransactionManagementError

from moderation.models import (
    ContentKind,
    ContentReview,
    DecisionSource,
    ModerationPolicy,
    ProviderAnswer,
    ReviewStatus,
)
from moderation.db.transactions import in_transaction
from moderation.observability.dry_run import model_results
from moderation.observability.evaluation import (
    NONE,
    Answered,
    Example,
    Judged,
    examples_decide,
    examples_detect,
)
from moderation.providers import ModerationResult, PartScore, Rationale, provider_reads_policy
from moderation.verdicts import rule_text

# Reviews read, detected, answered and decided at a time: a backtest's progress moves by one of
# these, and a cancellation is seen between two.
CHUNK = 2_000
# How long a worker may judge a backtest's chunk or a shadow's batch before another worker takes it
# over (it holds a lease, not a lock, while its provider judges: docs/design.md, invariant 6).
QUALITY_LEASE = timedelta(minutes=10)
CHANGES_KEPT = 1_000  # the changed reviews a backtest stores and shows (it counts them all)
JUDGEMENTS = (ReviewStatus.APPROVED, ReviewStatus.REJECTED)


@dataclass(frozen=True)
class HumanExample:
    example: Example
    review_id: uuid.UUID | None  # None: a row of a labelled file


def human_examples(*, since: datetime | None = None, limit: int | None = None) -> list[HumanExample]:
    """The reviews whose decision in force is a moderator's approval or rejection, newest decision
    first, as labelled examples: the text the rules read, label 1 for a rejection, the content's
    language and the rejection's category (`(none)` when there is none: an approval).

    Images are left out (a backtest judges text), and so is erased content (nothing is left)."""
    reviews = (ContentReview.objects
               .filter(decision__source=DecisionSource.MODERATOR, decision__label__in=JUDGEMENTS,
                       content__kind__in=(ContentKind.TEXT, ContentKind.METADATA), content__erased_at__isnull=True)
               .select_related("content", "decision").order_by("-decision__created_at", "-decision__id"))
    if since is not None:
        reviews = reviews.filter(decision__created_at__gte=since)
    if limit is not None:
        reviews = reviews[:limit]
    rows = []
    for review in reviews.iterator(chunk_size=CHUNK):
        text = rule_text(review.content)
        if not text.strip():
            continue
        decision = review.decision
        row = len(rows) + 1
        rows.append(HumanExample(
            Example(row=row, line=row, text=text, label=decision.label == ReviewStatus.REJECTED,
                    language=review.content.language or NONE, category=decision.category or NONE),
            review.pk))
    return rows


# --- provider answers, kept --------------------------------------------------------------------

def answer_model(provider_name: str, provider, policy: ModerationPolicy) -> str:
    """What a kept answer is keyed by besides the text: the model and its version, and for a
    provider whose prompt is the policy's written category definitions (`llm`), a digest of that
    wording: two versions' wordings are asked separately, one wording once."""
    if provider_name == "local":
        from moderation.providers.local import MODEL_NAME

        return f"local:{MODEL_NAME}"
    model = f"{provider_name}:{settings.PROVIDER_MODEL}"
    if provider_reads_policy(provider):
        wording = json.dumps(policy.category_definitions, sort_keys=True, ensure_ascii=False)
        model += f":definitions-{hashlib.sha256(wording.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"
    return model


def answer_key(model: str, text: str) -> str:
    return hashlib.sha256(f"{model}\x00{text}".encode("utf-8", "surrogatepass")).hexdigest()


def result_json(result: ModerationResult) -> dict:
    return {"model": result.model, "flagged": result.flagged, "categories": result.categories,
            "category_scores": result.category_scores,
            "parts": [[part.start, part.end, part.scores] for part in result.parts],
            "rationale": result.rationale.record() if result.rationale else None}


def result_from_json(data: dict) -> ModerationResult:
    rationale = data.get("rationale")
    return ModerationResult(model=data["model"], flagged=data["flagged"], categories=data["categories"],
                            category_scores=data["category_scores"],
                            parts=tuple(PartScore(start, end, scores) for start, end, scores in data["parts"]),
                            rationale=Rationale(**rationale) if rationale else None)


@dataclass
class AnswerCount:
    cached: int = 0
    asked: int = 0
    seconds: float = 0.0  # waiting for the provider


def kept_answers(texts: list[str], *, provider, model: str, policy: ModerationPolicy, count: AnswerCount) -> list:
    """The provider's answer for each text: a kept one where there is one, the provider's
    otherwise (asked with `policy`'s definitions where it reads them; kept for next time; an
    error is not kept, it is asked again)."""
    if in_transaction():
        # The provider may be a server across the network: no lock or transaction is held while it
        # judges (docs/design.md, invariant 6). Backtests and shadows hold leases instead.
        raise TransactionManagementError("a provider is never asked inside a transaction (docs/design.md, invariant 6)")
    keys = [answer_key(model, text) for text in texts]
    kept = {key: result_from_json(result)
            for key, result in ProviderAnswer.objects.filter(key__in=set(keys)).values_list("key", "result")}
    missing = [i for i, key in enumerate(keys) if key not in kept]
    first: dict[str, int] = {}  # a text twice is asked once
    for i in missing:
        first.setdefault(keys[i], i)
    asked_for = list(first.values())
    started = time.monotonic()
    fresh = model_results([texts[i] for i in asked_for], provider=provider, policy=policy) if asked_for else []
    count.seconds += time.monotonic() - started
    count.asked += len(asked_for)
    count.cached += len(texts) - len(missing)
    new_rows = []
    for i, answer in zip(asked_for, fresh, strict=True):
        kept[keys[i]] = answer
        if isinstance(answer, ModerationResult):
            new_rows.append(ProviderAnswer(key=keys[i], model=model, result=result_json(answer),
                                           text_digest=ProviderAnswer.digest_of(texts[i])))
    ProviderAnswer.objects.bulk_create(new_rows, ignore_conflicts=True, batch_size=1000)
    return [kept[key] for key in keys]


# --- the comparison ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Change:
    review_id: uuid.UUID | None
    row: int
    human: str  # the moderator's decision (approved / rejected), or the file's label as one
    baseline: str
    candidate: str
    category: str
    score: float | None

    def as_json(self) -> dict:
        return {"review": str(self.review_id) if self.review_id else None, "row": self.row, "human": self.human,
                "baseline": self.baseline, "candidate": self.candidate, "category": self.category,
                "score": self.score}


def judge_chunk(rows: list[HumanExample], *, candidate: ModerationPolicy, baseline: ModerationPolicy,
                provider_name: str, provider, count: AnswerCount) -> tuple[list[Judged], list[Judged]]:
    """Both versions' decisions of `rows`, from one language detection and one set of answers per
    model key (a provider whose prompt is the policy's gets asked once per wording)."""
    examples = [row.example for row in rows]
    texts = [example.text for example in examples]
    detections = examples_detect(examples)
    answers = {}
    judged = []
    for policy in (candidate, baseline):
        model = answer_model(provider_name, provider, policy)
        if model not in answers:
            answers[model] = kept_answers(texts, provider=provider, model=model, policy=policy, count=count)
        judged.append(examples_decide(examples, Answered(detections, answers[model]), policy=policy,
                                      provider_name=provider_name))
    return judged[0], judged[1]


def changes_of(rows: list[HumanExample], candidate: list[Judged], baseline: list[Judged]) -> list[Change]:
    return [Change(review_id=row.review_id, row=row.example.row,
                   human=ReviewStatus.REJECTED if row.example.label else ReviewStatus.APPROVED,
                   baseline=b.outcome.value, candidate=c.outcome.value, category=c.category, score=c.score)
            for row, c, b in zip(rows, candidate, baseline, strict=True) if c.outcome != b.outcome]
