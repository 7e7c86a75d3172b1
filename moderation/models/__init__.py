"""Models of the moderation app: the pipeline's (core.py) and the decision outbox (outbox.py)."""

from moderation.models.core import *  # noqa: F403
from moderation.models.core import __all__ as _core
from moderation.models.api import IdempotencyRecord
from moderation.models.outbox import DecisionNotification, NotificationAttempt, NotificationStatus, WebhookCircuit

__all__ = [*_core, "DecisionNotification", "IdempotencyRecord", "NotificationAttempt", "NotificationStatus", "WebhookCircuit"]
