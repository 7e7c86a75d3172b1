"""The default provider: alt-profanity-check's model, run in-process and offline.

It judges text (and the text values of metadata); it cannot see images or audio, so it refuses
them as UnsupportedContent and the pipeline hands them to a human.
"""

from __future__ import annotations

import logging
import threading
from importlib.metadata import version

from moderation.providers.base import (
    ItemError,
    ModerationInput,
    ModerationResult,
    ProviderError,
    UnsupportedContent,
    text_values,
)

logger = logging.getLogger(__name__)

# One category: the model scores offensive language, nothing else. Reporting scores for
# categories it never evaluated would be a lie the policy would then act on.
CATEGORY = "profanity"
FLAG_AT = 0.5

_lock = threading.Lock()
_predict_prob = None


def predictor():
    """The model's `predict_prob`: a callable from a list of texts to their probabilities.

    Loaded once per process. It is the package's own model read into plain numbers
    (moderation/providers/profanity_model.py): the same probabilities as
    `profanity_check.predict_prob`, without importing scikit-learn into the worker.
    """
    global _predict_prob
    if _predict_prob is None:
        with _lock:
            if _predict_prob is None:
                from moderation.providers.profanity_model import load

                _predict_prob = load()
    return _predict_prob


class LocalProvider:
    name = "local"
    kinds = frozenset({"text", "metadata"})  # a text model: images go to the banks and image_fallback
    model_name = f"alt-profanity-check-{version('alt-profanity-check')}"

    def warm_up(self) -> None:
        """Load the model now instead of on the first request (it takes a second or more)."""
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
        """One model call over every passage of `groups` (an error stands in its own slot)."""
        flat = [t for group in groups if isinstance(group, list) for t in group]
        scores = iter(predict(flat) if flat else ())
        answers: list[ModerationResult | ProviderError] = []
        for group in groups:
            if isinstance(group, ProviderError):
                answers.append(group)
                continue
            # The worst passage decides: one offensive field makes the whole content offensive.
            score = round(float(max(next(scores) for _ in group)) if group else 0.0, 6)
            answers.append(ModerationResult(
                model=self.model_name,
                flagged=score >= FLAG_AT,
                categories={CATEGORY: score >= FLAG_AT},
                category_scores={CATEGORY: score},
            ))
        return answers

    def _judge_alone(self, predict, group) -> ModerationResult | ProviderError:
        try:
            (answer,) = self._judge(predict, [group])
        except Exception as exc:  # noqa: BLE001 - this input alone fails
            return ItemError.unexpected(exc)
        return answer


def _passages(request: ModerationInput) -> list[str] | ProviderError:
    """The input's texts worth scoring, or the error that stands for it."""
    try:
        return [t for t in _texts(request) if t.strip()]
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
