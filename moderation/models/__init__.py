"""Models of the moderation app: the pipeline's (core.py), the notification outbox (outbox.py),
authors, strikes and account actions (authors.py), user reports and appeals (reports.py), statements for the DSA Transparency Database (transparency.py), images and hash banks (media.py), moderators' notes (notes.py), custom review queues (queues.py), moderator QA (qa.py), second looks at decided reviews (second_looks.py), erasure tombstones
(erasure.py), legal holds and preservation snapshots (holds.py), the periodic jobs' heartbeats (heartbeats.py), and backtests, provider answers and shadow runs (quality.py)."""

from moderation.models.core import *  # noqa: F403
from moderation.models.core import __all__ as _core
from moderation.models.api import IdempotencyRecord, RateCount
from moderation.models.authors import (
    ACCOUNT_REASON_MAX,
    AUTHOR_ID_MAX,
    RESTRICTED_STANDINGS,
    RESTRICTIVE_ACTIONS,
    STANDING_FOR_ACTION,
    STANDING_RANK,
    TRANSITION_FOR_ACTION,
    AccountAction,
    AccountAppeal,
    AccountAppealStatus,
    ActionCause,
    ActionKind,
    Author,
    RestrictionEnd,
    Standing,
    StandingCause,
    StandingTransition,
    Strike,
    StrikeEnd,
)
from moderation.models.bulk import (
    BULK_LIVE_STATUSES,
    BULK_REASON_MAX,
    BulkAction,
    BulkItemOutcome,
    BulkJob,
    BulkJobItem,
    BulkJobStatus,
)
from moderation.models.erasure import ERASED, ContentErasure
from moderation.models.holds import (
    HOLD_REFERENCE_MAX,
    HOLD_TEXT_MAX,
    AuthorityReport,
    DeferredErasure,
    Handover,
    HoldAction,
    HoldScope,
    LegalHold,
    LawEnforcementRequest,
    LegalHoldEvent,
    PreservationSnapshot,
    SnapshotView,
)
from moderation.models.heartbeats import Heartbeat
from moderation.models.second_looks import SECOND_LOOK_REASON_MAX, SecondLook, SecondLookStatus
from moderation.models.quality import (
    BACKTEST_LIVE_STATUSES,
    Backtest,
    BacktestItem,
    BacktestStatus,
    DecisionRollup,
    ProviderAnswer,
    QualityCursor,
    ShadowRun,
    ShadowVerdict,
)
from moderation.models.media import (
    BANK_NAME_MAX,
    ENTRY_LABEL_MAX,
    BankChangeKind,
    HashBank,
    HashBankChange,
    HashBankEntry,
    MediaPreference,
    MediaRemoval,
    MediaSource,
    ReviewMedia,
)
from moderation.models.notes import NOTE_MAX_CHARS, ModeratorNote
from moderation.models.queues import QUEUE_SLUG_MAX, ModerationQueue
from moderation.models.qa import QA_LABELS, QA_NOTE_MAX, DecisionTime, GoldenItem, QaItem, QaKind
from moderation.models.outbox import (
    DecisionNotification,
    NotificationAttempt,
    NotificationKind,
    NotificationStatus,
    WebhookCircuit,
)
from moderation.models.canned import APPROVAL_KEY, default_canned_reasons
from moderation.models.transparency import (
    INCOMPATIBLE,
    StatementStatus,
    TransparencyStatement,
    default_dsa_mapping,
    vocabulary,
)
from moderation.models.reports import (
    APPEAL_STATEMENT_MAX,
    NOTICE_KINDS,
    OTHER_REASON,
    REPORT_DETAIL_MAX,
    REPORTER_ID_MAX,
    Appeal,
    AppealStatus,
    PileOn,
    Report,
    ReportEscalation,
    Reporter,
    ReporterMute,
    ReportKind,
    ReportOutcome,
    appeal_outcome,
)

__all__ = [
    *_core, "BULK_LIVE_STATUSES", "BULK_REASON_MAX", "BulkAction", "BulkItemOutcome", "BulkJob", "BulkJobItem",
    "BulkJobStatus", "RateCount", "ACCOUNT_REASON_MAX", "AUTHOR_ID_MAX", "RESTRICTED_STANDINGS", "RESTRICTIVE_ACTIONS", "STANDING_FOR_ACTION",
    "STANDING_RANK", "TRANSITION_FOR_ACTION", "AccountAction", "AccountAppeal", "AccountAppealStatus", "ActionCause",
    "ActionKind", "Author", "RestrictionEnd", "Standing", "StandingCause", "StandingTransition", "Strike", "StrikeEnd", "ContentErasure", "ERASED", "DecisionNotification", "Heartbeat", "IdempotencyRecord", "ModeratorNote", "NOTE_MAX_CHARS",
    "NotificationAttempt", "NotificationKind", "NotificationStatus", "APPEAL_STATEMENT_MAX", "OTHER_REASON",
    "REPORT_DETAIL_MAX", "REPORTER_ID_MAX", "Appeal", "AppealStatus", "PileOn", "Report", "ReportEscalation", "Reporter", "ReporterMute", "ReportKind", "ReportOutcome", "NOTICE_KINDS", "appeal_outcome", "WebhookCircuit",
    "BANK_NAME_MAX", "ENTRY_LABEL_MAX", "BankChangeKind", "HashBank", "HashBankChange", "HashBankEntry", "MediaPreference", "MediaRemoval",
    "MediaSource", "ReviewMedia", "QUEUE_SLUG_MAX", "ModerationQueue",
    "INCOMPATIBLE", "StatementStatus", "TransparencyStatement", "default_dsa_mapping", "vocabulary",
    "APPROVAL_KEY", "default_canned_reasons",
    "BACKTEST_LIVE_STATUSES", "Backtest", "BacktestItem", "BacktestStatus", "DecisionRollup", "ProviderAnswer", "QualityCursor", "ShadowRun", "ShadowVerdict",
    "QA_LABELS", "QA_NOTE_MAX", "DecisionTime", "GoldenItem", "QaItem", "QaKind",
    "HOLD_REFERENCE_MAX", "HOLD_TEXT_MAX", "DeferredErasure", "HoldAction", "HoldScope", "LegalHold", "LegalHoldEvent",
    "PreservationSnapshot", "SnapshotView", "AuthorityReport", "LawEnforcementRequest", "Handover",
    "SECOND_LOOK_REASON_MAX", "SecondLook", "SecondLookStatus",
]
