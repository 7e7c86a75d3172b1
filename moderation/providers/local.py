"""The default provider: alt-profanity-check's model, run in-process and offline.

It judges text (and the text values of metadata); it cannot see images or audio, so it refuses
them as UnsupportedContent and the pipeline hands them to a human.
"""

from __future__ import annotations

import threading
from importlib.metadata import version

from moderation.providers.base import ModerationInput, ModerationResult, UnsupportedContent, text_values

# One category: the model scores offensive language, nothing else. Reporting scores for
# categories it never evaluated would be a lie the policy would then act on.
CATEGORY = "profanity"
FLAG_AT = 0.5

_lock = threading.Lock()
_predict_prob = None


def _model():
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
    model_name = f"alt-profanity-check-{version('alt-profanity-check')}"

    def warm_up(self) -> None:
        """Load the model now instead of on the first request (it takes a second or more)."""
        _model()

    def moderate(self, request: ModerationInput) -> ModerationResult:
        if request.content_type == "text":
            texts = [request.text]
        elif request.content_type == "metadata":
            texts = text_values(request.metadata)
        else:
            raise UnsupportedContent(f"the local model cannot judge {request.content_type} content")
        texts = [t for t in texts if t.strip()]
        # The worst passage decides: one offensive field makes the whole content offensive.
        score = float(max(_model()(texts))) if texts else 0.0
        score = round(score, 6)
        return ModerationResult(
            model=self.model_name,
            flagged=score >= FLAG_AT,
            categories={CATEGORY: score >= FLAG_AT},
            category_scores={CATEGORY: score},
        )
