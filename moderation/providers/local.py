"""The default provider: the project's own multilingual model, run in-process and offline.

The model (moderation/providers/local_model.py, trained by `make model`: training/, docs/model-card.md)
scores five of the policy's categories, each a calibrated probability: `insult`, `threat`,
`hate` (identity attacks), `sexual` and `profanity`. It was trained on
English, Indonesian, German, French and Arabic; it reads no language tag, so a text whose
language is unsure is judged by the one model that knows them all, and the worst category counts.

It judges text (and the text values of metadata); it cannot see images or audio, so it refuses
them as UnsupportedContent and the pipeline hands them to a human.

A text of more than one sentence is also judged by parts (moderation.text.parts): the model
scores the whole text and each of its sentences (or windows of words) in the same call, and the
result carries both, so the policy's `part_rule` can judge a long text by its worst sentence
instead of the diluted whole (docs/workplace.md, "Long texts").

The model reads each text in its normal form (moderation.text.normal; docs/design.md, "The normal
form"): "id\u200biot", "f.u.c.k", "fuuuuck" and a Cyrillic "і" in "idiot" are the words they
imitate, as the rules read them. The parts are cut from the normal form and reported as the spans
of the original text they came from, which is what is stored and shown.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from moderation.text import parts as text_parts
from moderation.providers.base import (
    ItemError,
    ModerationInput,
    ModerationResult,
    PartScore,
    ProviderError,
    UnsupportedContent,
)
from moderation.text.normal import normalize
from moderation.text.values import text_values

logger = logging.getLogger(__name__)

# A category is flagged when the model finds it more likely than not (its scores are calibrated
# probabilities); the policy's thresholds decide, this only feeds its `flagged_label`.
FLAG_AT = 0.5
# The model's categories, in the policy's names (identity attacks are `hate`): the loader refuses
# a model file that scores others. Version 1 of the model called insults `harassment` and threats
# `violence`: a policy version published then still applies its thresholds to these scores
# (moderation.verdicts.LEGACY_CATEGORY_NAMES).
CATEGORIES = ("insult", "threat", "hate", "sexual", "profanity")
MODEL_NAME = "local-multilingual-2"

_lock = threading.Lock()
_model = None


def predictor():
    """The model: a callable from a list of texts (in their normal form) to one
    {category: probability} per text. Loaded once per process (moderation/data/local_model.npz,
    NumPy only); it keeps no state between calls, so threads share it."""
    global _model
    if _model is None:
        with _lock:
            if _model is None:
                from moderation.providers.local_model import load

                _model = load(categories=CATEGORIES)
    return _model


def operating_points() -> dict:
    """{category: CategoryPoints} of the model file: precision, recall and the share flagged at
    each threshold from 0.05 to 0.95 on the held-out split of its training data
    (moderation.providers.local_model.CategoryPoints; docs/model-card.md, "Operating points").
    Read from the file's meta alone, each time: the policy page's web process never loads (nor
    keeps) the weights a moderation worker scores with."""
    from moderation.providers.local_model import read_operating_points

    return read_operating_points(categories=CATEGORIES)


class LocalProvider:
    name = "local"
    kinds = frozenset({"text", "metadata"})  # a text model: images go to the banks and image_fallback
    model_name = MODEL_NAME

    def warm_up(self) -> None:
        """Load the model now instead of on the first request."""
        predictor()

    def moderate(self, request: ModerationInput) -> ModerationResult:
        (answer,) = self.moderate_many([request])
        if isinstance(answer, ProviderError):
            raise answer
        return answer

    def moderate_many(self, requests: list[ModerationInput]) -> list[ModerationResult | ProviderError]:
        """Judge several inputs with one call of the model over all their texts (a batch,
        docs/design.md "Batches"): one answer per input, in order. Content the model cannot judge
        is an UnsupportedContent in its own slot, an input whose scoring raised an ItemError in
        its own; the others are judged all the same. A model that cannot load fails them all."""
        predict = predictor()  # outside every try below: a model that cannot run is not one input's fault
        groups = [_passages(request) for request in requests]
        try:
            return self._judge(predict, groups)
        except Exception:  # noqa: BLE001 - one input may have broken the call over all of them
            logger.warning("the model failed over %d inputs: each is judged alone", len(groups), exc_info=True)
        return [self._judge_alone(predict, group) for group in groups]

    def _judge(self, predict, groups: list) -> list[ModerationResult | ProviderError]:
        """One model call over every passage and part of `groups` (an error stands in its own slot)."""
        flat = [t for group in groups if isinstance(group, Passages) for t in group.texts()]
        scores = iter(predict(flat) if flat else ())
        answers: list[ModerationResult | ProviderError] = []
        for group in groups:
            if isinstance(group, ProviderError):
                answers.append(group)
                continue
            whole = [next(scores) for _ in group.passages]
            parts = tuple(PartScore(start, end, _rounded(next(scores))) for start, end in group.parts)
            # The worst passage decides, per category: one offensive field makes the whole content offensive.
            category_scores = {c: round(max((w[c] for w in whole), default=0.0), 6) for c in CATEGORIES}
            flags = {c: v >= FLAG_AT for c, v in category_scores.items()}
            answers.append(ModerationResult(
                model=self.model_name,
                flagged=any(flags.values()),
                categories=flags,
                category_scores=category_scores,
                parts=parts,
            ))
        return answers

    def _judge_alone(self, predict, group) -> ModerationResult | ProviderError:
        try:
            (answer,) = self._judge(predict, [group])
        except Exception as exc:  # noqa: BLE001 - this input alone fails
            return ItemError.unexpected(exc)
        return answer


def _rounded(scores: dict[str, float]) -> dict[str, float]:
    return {c: round(v, 6) for c, v in scores.items()}


@dataclass(frozen=True)
class Passages:
    """What the model scores of one input: its texts worth scoring, whole and in their normal
    form, and the parts of them: `parts` are spans of the text the rules read
    (moderation.verdicts.rule_text: a text's own, or metadata's string values joined by line
    breaks), `part_texts` what the model reads of each (the normal form of the span). A passage of
    one part has no parts: its whole score is that part's."""

    rule_text: str
    passages: tuple[str, ...]
    parts: tuple[tuple[int, int], ...]
    part_texts: tuple[str, ...] = ()

    def texts(self) -> list[str]:
        return [*self.passages, *self.part_texts]


def _passages(request: ModerationInput) -> Passages | ProviderError:
    """The input's texts and parts worth scoring, or the error that stands for it."""
    try:
        values = _texts(request)
        passages, spans, part_texts, offset = [], [], [], 0
        for value in values:
            normal = normalize(value)
            if normal.text.strip():
                passages.append(normal.text)
                # Its other readings ("I k i l l you" is also "i kill you"): the worst passage counts.
                passages += [reading.text for reading in normal.readings]
                found = text_parts.parts(normal.text)
                if len(found) > 1:
                    for start, end in found:
                        original_start, original_end = normal.original_span(start, end)
                        spans.append((offset + original_start, offset + original_end))
                        part_texts.append(normal.text[start:end])
            offset += len(value) + 1  # the line break that joins them
        return Passages("\n".join(values), tuple(passages), tuple(spans), tuple(part_texts))
    except UnsupportedContent as exc:
        return exc
    except Exception as exc:  # noqa: BLE001 - this input alone fails
        return ItemError.unexpected(exc)


def _texts(request: ModerationInput) -> list[str]:
    if request.content_type == "text":
        return [request.text]
    if request.content_type == "metadata":
        return text_values(request.metadata)
    raise UnsupportedContent(f"the local model cannot judge {request.content_type} content")
