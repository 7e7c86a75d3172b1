"""Models of the moderation app: the pipeline's (core.py), the decision outbox (outbox.py) and
erasure tombstones (erasure.py)."""

from moderation.models.core import *  # noqa: F403
from moderation.models.core import __all__ as _core
from moderation.models.api import IdempotencyRecord
from moderation.models.erasure import ContentErasure
from moderation.models.outbox import DecisionNotification, NotificationAttempt, NotificationStatus

__all__ = [*_core, "ContentErasure", "DecisionNotification", "IdempotencyRecord", "NotificationAttempt", "NotificationStatus"]
