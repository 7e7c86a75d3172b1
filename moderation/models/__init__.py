"""Models of the moderation app: the pipeline's (core.py), the decision outbox (outbox.py) and
moderators' notes (notes.py)."""

from moderation.models.core import *  # noqa: F403
from moderation.models.core import __all__ as _core
from moderation.models.api import IdempotencyRecord
from moderation.models.notes import NOTE_MAX_CHARS, ModeratorNote
from moderation.models.outbox import DecisionNotification, NotificationAttempt, NotificationStatus

__all__ = [*_core, "DecisionNotification", "IdempotencyRecord", "ModeratorNote", "NOTE_MAX_CHARS", "NotificationAttempt", "NotificationStatus"]
