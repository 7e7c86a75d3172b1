"""Content, reviews and their state machine, moderation requests, decisions and the policy.

Models are thin: fields, constraints, cheap properties and `@transition` methods that only guard
and set state. Every write goes through `moderation.services`.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.core.validators import URLValidator
from django.db import models
from django.db.models import Exists, OuterRef, Q
from django.db.models import Case, Value, When
from django.db.models.functions import Cast, Right
from django_fsm import RETURN_VALUE, ConcurrentTransitionMixin, FSMField, transition
from simple_history.models import HistoricalRecords

from moderation.db.ids import uuid7
from moderation.models.canned import default_canned_reasons
from moderation.models.definitions import DEFAULT_CATEGORY_DEFINITIONS, default_category_definitions
from moderation.models.transparency import default_dsa_mapping


def history_user(request=None, **kwargs):
    """The staff user behind a change, for django-simple-history.

    On API requests `request.user` is an ApiClient, not a user: those changes carry no user
    (the transition log names the client or worker as the actor instead).
    """
    user = getattr(request, "user", None)
    return user if isinstance(user, AbstractBaseUser) else None


# A review's history rows. Named, so that transition_review can write the row this would write
# on save together with the transition row, in one statement (moderation/services/transitions.py).
REVIEW_HISTORY = HistoricalRecords(
    excluded_fields=["last_enqueued_at", "leased_to", "lease_expires_at", "provider_wait_since",
                     "queue", "last_queue", "priority", "queued_at", "queue_order_at"],
    get_user=history_user,
)


class ApiClient(models.Model):
    """A client application of the REST API. Only a SHA-256 hash of its token is stored."""

    name = models.CharField(max_length=100, unique=True)
    token_hash = models.CharField(max_length=64, unique=True)
    token_prefix = models.CharField(max_length=16, help_text="First characters of the token, to recognise it.")
    webhook_url = models.URLField(max_length=2048, blank=True, validators=[URLValidator(schemes=["http", "https"])])
    # Signs decision notifications (Standard Webhooks). The client needs it to verify them, so
    # unlike the token it is kept as is; create_api_client shows it once.
    webhook_secret = models.CharField(max_length=100, blank=True)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    # Who changed its name or webhook URL, and when (moderation.services.clients.api_client_update);
    # never a copy of its secrets.
    history = HistoricalRecords(get_user=history_user, excluded_fields=["token_hash", "webhook_secret"])

    def __str__(self) -> str:
        return self.name

    # DRF treats the authenticated principal as `request.user`.
    @property
    def is_authenticated(self) -> bool:
        return True


class ContentKind(models.TextChoices):
    TEXT = "text", "Text"
    IMAGE = "image", "Image"
    AUDIO = "audio", "Audio"
    METADATA = "metadata", "Metadata"


# The PostgreSQL text search configuration of each language code the detector may store
# (moderation/text/language.py): its stemmer and stop words. Every configuration here is one that
# PostgreSQL 14, the oldest Django 5.2 supports, ships; a language without one, and an unsure
# detection (""), is read with `simple` (words lower-cased, no stemming, no stop words).
# Malay uses the Indonesian stemmer: the two share the affixes it strips (me-, ber-, -kan, -nya).
# Changing this map changes the generated column: a migration (docs/workplace.md, "Search").
TEXT_SEARCH_CONFIGS = {
    "ar": "arabic", "ca": "catalan", "da": "danish", "de": "german", "el": "greek", "en": "english",
    "es": "spanish", "eu": "basque", "fi": "finnish", "fr": "french", "ga": "irish", "hi": "hindi",
    "hu": "hungarian", "hy": "armenian", "id": "indonesian", "it": "italian", "lt": "lithuanian",
    "ms": "indonesian", "nb": "norwegian", "ne": "nepali", "nl": "dutch", "nn": "norwegian",
    "pt": "portuguese", "ro": "romanian", "ru": "russian", "sr": "serbian", "sv": "swedish",
    "ta": "tamil", "tr": "turkish", "yi": "yiddish",
}
FALLBACK_TEXT_SEARCH_CONFIG = "simple"


class RegConfig(models.Field):
    """A text search configuration name as SQL writes it (`'english'::regconfig`): a constant, so
    the generated column's expression stays immutable (a text cast to regconfig is not)."""

    def db_type(self, connection):
        return "regconfig"


def text_search_config_expression():
    """The configuration a content's words are read with: its language's, else `simple`."""
    return Case(
        *[When(language=code, then=Cast(Value(config), RegConfig()))
          for code, config in sorted(TEXT_SEARCH_CONFIGS.items())],
        default=Cast(Value(FALLBACK_TEXT_SEARCH_CONFIG), RegConfig()),
        output_field=RegConfig(),
    )


class Content(models.Model):
    # Time-ordered keys: inserts and recent lookups share a few index pages (moderation/db/ids.py).
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    client = models.ForeignKey(  # indexed by the unique (client, external_id)
        ApiClient, on_delete=models.PROTECT, related_name="contents", db_index=False
    )
    external_id = models.CharField(max_length=255)
    kind = models.CharField(max_length=16, choices=ContentKind.choices)
    text = models.TextField(blank=True)
    media_url = models.URLField(max_length=2048, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    # What the language detector read (moderation.text.language), set when the content is first
    # decided: the code when it was sure ("" when unsure), and its leading candidates
    # [[code, confidence], ...]. NULL candidates: not detected yet.
    language = models.CharField(max_length=8, blank=True, default="", db_default="")
    language_candidates = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Set by erasure (moderation/privacy/erasure.py; its tombstone says who and why): read with the
    # content, so dispatch refuses erased content without one more query.
    erased_at = models.DateTimeField(null=True, blank=True)
    # Its words for full-text search (docs/workplace.md, "Search"), kept by PostgreSQL itself:
    # recomputed whenever the text or the language changes, so the detection that comes after
    # the insert re-reads the words with the language's stemmer, and erasure, which blanks the
    # text, empties it in the same UPDATE.
    search_vector = models.GeneratedField(
        expression=SearchVector("text", config=text_search_config_expression()),
        output_field=SearchVectorField(), db_persist=True,
    )

    class Meta:
        constraints = [
            # The database, not a check-then-insert, guarantees one content per external id.
            models.UniqueConstraint(fields=["client", "external_id"], name="content_client_external_id_uniq"),
        ]
        indexes = [
            models.Index(fields=["external_id"], name="content_external_id_idx"),  # admin search
            GinIndex(fields=["search_vector"], name="content_search_vector_idx"),
            # The language filter of the review list and the queues: few reviews have a rare one.
            models.Index(fields=["language"], name="content_language_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.client_id}:{self.external_id}"


class ResultOutcome(models.TextChoices):
    """What became of a provider result: the one list used by finalize, the callback inbox, the
    callback endpoint's schema and the metrics (docs/design.md, invariants 4 and 5)."""

    APPLIED = "applied", "Applied"
    STALE = "stale", "Stale (superseded key)"
    DUPLICATE = "duplicate", "Duplicate result"
    ALREADY_FINAL = "already_final", "Review already final"
    ORPHAN = "orphan", "Unknown idempotency key"
    # Signed for one provider's endpoint, naming another provider's operation: never applied.
    WRONG_PROVIDER = "wrong_provider", "Operation of another provider"
    INVALID = "invalid", "Invalid body"


class ReviewStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    PROCESSING = "processing", "Processing"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"
    MANUAL_REVIEW = "manual_review", "Manual review"


FINAL_STATUSES = (ReviewStatus.APPROVED, ReviewStatus.REJECTED, ReviewStatus.MANUAL_REVIEW)
DECISION_LABELS = FINAL_STATUSES


class Cause(models.TextChoices):
    JOB_STARTED = "job_started"
    PROVIDER_RESULT = "provider_result"
    PROVIDER_CALLBACK = "provider_callback"
    RETRY_RECONCILE = "retry_reconcile"
    PROVIDER_FAILED = "provider_failed"
    MANUAL_ESCALATION = "manual_escalation"
    MANUAL_OVERRIDE = "manual_override"
    REPROCESS = "reprocess"
    USER_REPORTS = "user_reports"
    APPEAL = "appeal"
    CONTENT_ERASED = "content_erased"
    NOTICE = "notice"
    # A moderator took back their own decision before anything of it left (review_undo).
    UNDO = "undo"


class ReviewQueue(models.TextChoices):
    """The review queues: the named queues of `manual_review` reviews, each fed by the cause that
    sent it there (not the job queue, django-q2's: moderation/jobs.py)."""

    # Content in a category the policy marks as a threat to life or safety (DSA Art. 18): ahead of
    # every other queue's work, with a deadline in minutes (the policy's urgent_deadline_minutes).
    URGENT = "urgent", "Threat to life or safety"
    LOW_CONFIDENCE = "low_confidence", "Low-confidence model results"
    REPORTS = "reports", "User reports"
    APPEALS = "appeals", "Appeals"
    PROVIDER_FAILURES = "provider_failures", "Provider failures"
    ESCALATIONS = "escalations", "Escalated by a moderator"
    # New content of a suspended or banned author, never approved automatically (the policy's
    # `while_restricted`).
    RESTRICTED_AUTHORS = "restricted_authors", "Restricted authors"
    # Reviews a DSA notice or a trusted flagger sent to a human (cause notice, or a noticed
    # review's provider result): trusted flaggers first (moderation.review_queues).
    NOTICES = "notices", "DSA notices and trusted flaggers"
    # Images and audio that no bank matched and no provider could judge (the policy's
    # `image_fallback`), or whose bytes could not be read: not a provider's failure.
    IMAGES = "images", "Images"


# Causes whose transition lands on the decision's label (the others have one fixed target).
LABELLED_CAUSES = (Cause.PROVIDER_RESULT, Cause.PROVIDER_CALLBACK, Cause.MANUAL_OVERRIDE)


SHORT_ID_LENGTH = 8


def short_id_expression():
    """A review's short id in SQL (`ContentReview.short_id`), as its index and its lookups write it."""
    return Right(Cast("id", output_field=models.TextField()), SHORT_ID_LENGTH)


class ContentReview(ConcurrentTransitionMixin, models.Model):
    """The moderation state of one content. `status` is protected: only transitions change it.

    ConcurrentTransitionMixin turns every save into `UPDATE ... WHERE status = <status read>`, so a
    stale instance can never overwrite a newer state (it raises ConcurrentTransition instead).
    """

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)  # time-ordered: moderation/db/ids.py
    content = models.OneToOneField(Content, on_delete=models.PROTECT, related_name="review")
    # Denormalised from content so a client's listing is one indexed scan.
    client = models.ForeignKey(  # indexed by the (client, ...) indexes in Meta
        ApiClient, on_delete=models.PROTECT, related_name="reviews", db_index=False
    )
    # Who wrote it (docs/design.md, "Authors"): NULL when the client sent no author_id.
    author = models.ForeignKey(  # indexed by review_author_idx
        "moderation.Author", on_delete=models.PROTECT, null=True, blank=True, related_name="reviews", db_index=False
    )
    # Submitted while its author was suspended or banned: never approved automatically.
    author_restricted = models.BooleanField(default=False, db_default=False)
    # The strongest notice filed on it ("dsa_notice" or "trusted_flagger", moderation.models.ReportKind;
    # "" for none), set under its row lock by the report: a noticed review is never approved
    # automatically, and waits in the notices queue (docs/design.md, "Reports").
    notice_kind = models.CharField(max_length=16, blank=True, default="", db_default="")
    # Its reports look like a pile-on (moderation.models.PileOn: a burst, or mostly reporters who
    # are rarely right), set under its row lock by the report that showed it; "" for none.
    pile_on = models.CharField(max_length=16, blank=True, default="", db_default="")
    status = FSMField(default=ReviewStatus.PENDING, choices=ReviewStatus.choices, protected=True)
    # Bumped by every transition: a form or a caller that read version N can refuse to act on N+1.
    version = models.PositiveIntegerField(default=1)
    active_idempotency_key = models.UUIDField(null=True, blank=True)
    worker_id = models.CharField(max_length=150, blank=True)
    provider_request_id = models.CharField(max_length=255, blank=True)
    decision = models.OneToOneField(
        "Decision", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    processing_started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    last_enqueued_at = models.DateTimeField(null=True, blank=True)
    # A moderator's lease on it, taken from its review queue with "Review next": who holds it,
    # until when (a worker *claims* a review; a moderator *leases* one: docs/design.md, "Names").
    # The columns keep the names they had before the fields were renamed: migrations run while
    # the old code still serves (migration 0013).
    leased_to = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
        db_column="claimed_by_id",
    )
    lease_expires_at = models.DateTimeField(null=True, blank=True, db_column="claim_expires_at")
    # Since when this review waits for its provider's circuit to let work through.
    provider_wait_since = models.DateTimeField(null=True, blank=True)
    # Its place among the humans' work, set when it enters manual_review and cleared when it
    # leaves (`moderation.review_queues.queue_entry`): the review queue, the priority points it entered with,
    # when it entered, and its order key (the entry time moved earlier by its priority).
    # A slug: a built-in ReviewQueue or a custom queue's (moderation.models.queues), which the
    # policy's routing rules may name; no choices, so a custom queue needs no migration.
    queue = models.CharField(max_length=24, blank=True, default="", db_default="")
    # The queue it waits in, or last waited in once it left (decided, erased): set with `queue`
    # and never cleared. Who may see the review and everything of it reads this one column
    # (moderation.selectors.queues_forbidden; docs/workplace.md, "Routing rules and queue access").
    last_queue = models.CharField(max_length=24, blank=True, default="", db_default="")
    priority = models.FloatField(null=True, blank=True)
    queued_at = models.DateTimeField(null=True, blank=True)
    queue_order_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    history = REVIEW_HISTORY

    class Meta:
        indexes = [
            models.Index(fields=["client", "status", "-created_at"], name="review_client_status_idx"),
            models.Index(fields=["client", "-created_at"], name="review_client_created_idx"),
            models.Index(fields=["status", "-created_at"], name="review_status_created_idx"),
            # The review list's default order (newest first) without a sort of the whole table.
            models.Index(fields=["created_at", "id"], name="review_created_idx"),
            # The sweeper's scan for lost jobs: pending reviews by when their job was enqueued
            # (submit and reprocess always set it).
            models.Index(
                fields=["last_enqueued_at"],
                name="review_pending_enqueued_idx",
                condition=Q(status="pending"),
            ),
            # The review queues: "review next" and the queue page walk these in order, one
            # named queue at a time or all of them together. The included columns let the review
            # queue figures (depth, leases, oldest wait) be counted from the index alone.
            models.Index(
                fields=["queue", "queue_order_at", "id"], name="review_queue_order_idx",
                include=["queued_at", "lease_expires_at"], condition=Q(status="manual_review"),
            ),
            models.Index(
                fields=["queue_order_at", "id"], name="review_any_queue_order_idx", condition=Q(status="manual_review")
            ),
            models.Index(
                fields=["provider_wait_since"], name="review_waiting_idx", condition=Q(provider_wait_since__isnull=False)
            ),
            models.Index(
                fields=["provider_request_id"], name="review_provider_id_idx", condition=~Q(provider_request_id="")
            ),
            # An author's reviews, newest first (the author page, the API's counts).
            models.Index(fields=["author", "-created_at"], name="review_author_idx", condition=Q(author__isnull=False)),
            # What moderators see and type (`short_id`): the search box and review_timeline find it.
            models.Index(short_id_expression(), name="review_short_id_idx"),
        ]
        permissions = [
            ("override_review", "Can override a moderation decision"),
            ("escalate_review", "Can send a review to manual review"),
            ("reprocess_review", "Can send a review through the provider again"),
        ]

    def __str__(self) -> str:
        return f"review {self.id} ({self.status})"

    @property
    def short_id(self) -> str:
        """The id moderators see and type: its last 8 hex digits. Not the first ones: an id is
        time-ordered (moderation/db/ids.py), so every review of the same weeks starts alike."""
        return self.pk.hex[-SHORT_ID_LENGTH:]

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_STATUSES

    # --- transitions: guards and state only; services write the audit row ---------------------

    @transition(field=status, source=ReviewStatus.PENDING, target=ReviewStatus.PROCESSING)
    def start_processing(self) -> None:
        pass

    @transition(field=status, source=ReviewStatus.PROCESSING, target=ReviewStatus.PROCESSING)
    def supersede(self) -> None:
        pass

    @transition(field=status, source=ReviewStatus.PROCESSING, target=RETURN_VALUE(*DECISION_LABELS))
    def apply_result(self, label: str) -> str:
        return label

    @transition(field=status, source=ReviewStatus.PROCESSING, target=ReviewStatus.MANUAL_REVIEW)
    def escalate_failure(self) -> None:
        pass

    @transition(field=status, source=ReviewStatus.PROCESSING, target=ReviewStatus.MANUAL_REVIEW)
    def escalate(self) -> None:
        pass

    @transition(
        field=status,
        source=list(FINAL_STATUSES),
        target=RETURN_VALUE(ReviewStatus.APPROVED, ReviewStatus.REJECTED),
    )
    def override(self, label: str) -> str:
        return label

    @transition(field=status, source=list(FINAL_STATUSES), target=ReviewStatus.PENDING)
    def reprocess(self) -> None:
        pass

    @transition(field=status, source=ReviewStatus.APPROVED, target=ReviewStatus.MANUAL_REVIEW)
    def report_escalate(self) -> None:
        """Enough distinct users reported an approved content: a human looks (docs/design.md, 12)."""

    @transition(field=status, source=ReviewStatus.APPROVED, target=ReviewStatus.MANUAL_REVIEW)
    def notice_escalate(self) -> None:
        """A DSA notice or a trusted flagger reported an approved content: a human looks, whatever
        the report threshold (docs/design.md, "Reports")."""

    @transition(field=status, source=ReviewStatus.REJECTED, target=ReviewStatus.MANUAL_REVIEW)
    def appeal(self) -> None:
        """The rejected content's owner appealed: a human decides again (docs/design.md, 13)."""

    @transition(field=status, source=[ReviewStatus.APPROVED, ReviewStatus.REJECTED], target=ReviewStatus.MANUAL_REVIEW)
    def undo(self) -> None:
        """A moderator took back the decision they made of a review in manual_review, before its
        notification left (docs/workplace.md, "Undo"): the review waits for a human again."""

    @transition(field=status, source=[ReviewStatus.PENDING, ReviewStatus.PROCESSING], target=ReviewStatus.MANUAL_REVIEW)
    @transition(field=status, source=ReviewStatus.MANUAL_REVIEW, target=ReviewStatus.REJECTED)
    def stop_for_erasure(self) -> None:
        """The content was erased before a decision: nothing is left to moderate; or while an
        appeal of its rejection was open: the rejection stands (docs/design.md, 16)."""


# Which transition method each cause runs. The legal (from, to) pairs follow from the decorators.
TRANSITION_FOR_CAUSE = {
    Cause.JOB_STARTED: "start_processing",
    Cause.RETRY_RECONCILE: "supersede",
    Cause.PROVIDER_RESULT: "apply_result",
    Cause.PROVIDER_CALLBACK: "apply_result",
    Cause.PROVIDER_FAILED: "escalate_failure",
    Cause.MANUAL_ESCALATION: "escalate",
    Cause.MANUAL_OVERRIDE: "override",
    Cause.REPROCESS: "reprocess",
    Cause.USER_REPORTS: "report_escalate",
    Cause.APPEAL: "appeal",
    Cause.CONTENT_ERASED: "stop_for_erasure",
    Cause.NOTICE: "notice_escalate",
    Cause.UNDO: "undo",
}


class RequestStatus(models.TextChoices):
    CREATED = "created", "Created"
    SENT = "sent", "Sent"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    SUPERSEDED = "superseded", "Superseded"


OPEN_REQUEST_STATUSES = (RequestStatus.CREATED, RequestStatus.SENT)


class ModerationRequest(models.Model):
    """One logical moderation operation: one idempotency key, reused by each of its attempts.

    The key is stored (in the claim's transaction) before any request leaves. A new operation
    (reconcile, reprocess) is a new row with a new key that `supersedes` the previous one.
    """

    review = models.ForeignKey(  # indexed by request_review_idx (review, id)
        ContentReview, on_delete=models.PROTECT, related_name="requests", db_index=False
    )
    idempotency_key = models.UUIDField(unique=True, default=uuid7, editable=False)  # time-ordered: moderation/db/ids.py
    provider = models.CharField(max_length=32)
    provider_request_id = models.CharField(max_length=255, blank=True)
    status = models.CharField(max_length=16, choices=RequestStatus.choices, default=RequestStatus.CREATED)
    cause = models.CharField(max_length=32, choices=Cause.choices, default=Cause.JOB_STARTED)
    supersedes = models.OneToOneField(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="superseded_by"
    )
    # Superseding operations in a row for this review (0 for the first operation of a run).
    generation = models.PositiveSmallIntegerField(default=0)
    attempt_no = models.PositiveSmallIntegerField(default=0, help_text="Attempts started so far.")
    max_attempts = models.PositiveSmallIntegerField()
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_enqueued_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    # The W3C traceparent of the work that started this operation (audit/tracing.py): a callback
    # names the operation by its key, and continues that trace. Empty when tracing is off.
    trace_parent = models.CharField(max_length=64, blank=True, db_default="")  # (raw inserts, e.g. bench seeding)
    # An image's operation is judged under the policy version its banks were matched with,
    # pinned here before the provider is called (a version published meanwhile must not decide
    # with matches it did not make), with what was read of the image: {"matches": [...],
    # "never_display", "error"} (moderation/services/media.py). NULL for text.
    policy = models.ForeignKey("ModerationPolicy", on_delete=models.PROTECT, null=True, blank=True,
                               related_name="+", db_index=False)
    media = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["review", "id"], name="request_review_idx"),
            models.Index(
                fields=["next_attempt_at"],
                name="request_retry_due_idx",
                condition=Q(status__in=["created", "sent"], next_attempt_at__isnull=False),
            ),
            # Reconcile's scan: live operations not waiting for a retry, by last activity.
            models.Index(
                fields=["updated_at"],
                name="request_open_idle_idx",
                condition=Q(status__in=["created", "sent"], next_attempt_at__isnull=True),
            ),
            models.Index(
                fields=["provider_request_id"],
                name="request_provider_id_idx",
                condition=~Q(provider_request_id=""),
            ),
        ]

    def __str__(self) -> str:
        return f"request {self.idempotency_key} ({self.status})"

    @property
    def attempts_left(self) -> int:
        return max(self.max_attempts - self.attempt_no, 0)


class AttemptOutcome(models.TextChoices):
    IN_FLIGHT = "in_flight", "In flight"
    RESULT = "result", "Result received"
    ACCEPTED = "accepted", "Accepted (callback expected)"
    TIMEOUT = "timeout", "Timeout"
    CONNECTION_ERROR = "connection_error", "Connection error"
    HTTP_4XX = "http_4xx", "Client error (4xx)"
    HTTP_5XX = "http_5xx", "Server error (5xx)"
    MALFORMED = "malformed", "Malformed answer"
    UNSUPPORTED = "unsupported", "Unsupported content"
    ERROR = "error", "Other provider error"
    # This one item failed (scoring, deciding or recording it), not the provider: retried like
    # any failed attempt, never counted against the provider's circuit.
    ITEM_ERROR = "item_error", "Failed on this item"
    ABANDONED = "abandoned", "Abandoned (worker lost)"


class ProviderAttempt(models.Model):
    """One call to the provider on behalf of a request: who made it, how it ended, how long."""

    request = models.ForeignKey(  # indexed by the unique (request, attempt_no)
        ModerationRequest, on_delete=models.PROTECT, related_name="attempts", db_index=False
    )
    provider = models.CharField(max_length=32)  # the request's, copied: the breaker's window scan
    attempt_no = models.PositiveSmallIntegerField()
    worker_id = models.CharField(max_length=150, blank=True)
    job_id = models.CharField(max_length=64, blank=True)
    outcome = models.CharField(max_length=20, choices=AttemptOutcome.choices, default=AttemptOutcome.IN_FLIGHT)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["request", "attempt_no"], name="attempt_request_no_uniq"),
        ]
        indexes = [models.Index(fields=["provider", "started_at"], name="attempt_provider_started_idx")]

    def __str__(self) -> str:
        return f"attempt {self.attempt_no} of {self.request_id}: {self.outcome}"


# Attempt outcomes that say the provider is unwell (not that the content was a problem).
PROVIDER_FAILURES = (
    AttemptOutcome.TIMEOUT,
    AttemptOutcome.CONNECTION_ERROR,
    AttemptOutcome.HTTP_5XX,
    AttemptOutcome.MALFORMED,
    AttemptOutcome.ERROR,
)


class CircuitState(models.TextChoices):
    CLOSED = "closed", "Closed (calls flow)"
    OPEN = "open", "Open (calls paused)"
    HALF_OPEN = "half_open", "Half-open (one trial call)"


class ProviderCircuit(models.Model):
    """The circuit breaker of one provider. Its failure window is read from ProviderAttempt, so
    every web and worker process sees the same figures; only state changes write here."""

    provider = models.CharField(max_length=32, unique=True)
    state = models.CharField(max_length=16, choices=CircuitState.choices, default=CircuitState.CLOSED)
    opened_at = models.DateTimeField(null=True, blank=True)
    probe_started_at = models.DateTimeField(null=True, blank=True)
    last_failure_ratio = models.FloatField(null=True, blank=True)
    changed_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.provider}: {self.state}"


class DecisionSource(models.TextChoices):
    PROVIDER = "provider", "Provider result"
    MODERATOR = "moderator", "Moderator"
    SYSTEM = "system", "System (provider failed)"


class DecisionQuerySet(models.QuerySet):
    def standing(self) -> DecisionQuerySet:
        """The decisions that count in the figures: every one but those their moderator undid
        (DecisionUndo; docs/workplace.md, "Undo"). The one definition, with standing_decision_sql."""
        return self.exclude(Exists(DecisionUndo.objects.filter(decision=OuterRef("pk"))))


def standing_decision_sql(alias: str) -> str:
    """DecisionQuerySet.standing as a condition of raw SQL on the decision row `alias`."""
    return f"NOT EXISTS (SELECT 1 FROM moderation_decisionundo u WHERE u.decision_id = {alias}.id)"


class Decision(models.Model):
    """An immutable decision with everything needed to explain it (docs/design.md, invariant 9)."""

    review = models.ForeignKey(ContentReview, on_delete=models.PROTECT, related_name="decisions")
    label = models.CharField(max_length=16, choices=[(s.value, s.label) for s in DECISION_LABELS])
    source = models.CharField(max_length=16, choices=DecisionSource.choices)
    score = models.FloatField(null=True, blank=True, help_text="Highest category score.")
    flagged = models.BooleanField(null=True, blank=True)
    categories = models.JSONField(default=dict, blank=True)
    category_scores = models.JSONField(default=dict, blank=True)
    model = models.CharField(max_length=100, blank=True)
    policy = models.ForeignKey("ModerationPolicy", on_delete=models.PROTECT, null=True, blank=True)
    explanation = models.TextField(blank=True)
    request = models.ForeignKey(
        ModerationRequest, on_delete=models.PROTECT, null=True, blank=True, related_name="decisions"
    )
    callback = models.ForeignKey(
        "callbacks.ProviderCallback", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    moderator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    reason = models.TextField(blank=True)
    # A moderator's violation category (one of the policy's categories); blank for an approval
    # and for decisions computed from category scores, which carry their own.
    category = models.CharField(max_length=64, blank=True, default="", db_default="")
    # The policy's watched-term rules that matched, each {rule, category, action, language, term,
    # start, end} (moderation.verdicts.match_record: never the words as written), and whether the model's score was used
    # (not for a language the policy says the model cannot judge; NULL: no model involved).
    rule_matches = models.JSONField(default=list, blank=True, db_default=[])
    model_used = models.BooleanField(null=True, blank=True)
    # A moderator's canned reasons (codes of the policy's `canned_reasons` for the decision's
    # category), and whether their free text (`reason`) goes to the client: NULL for a decision
    # from before the choice existed (and an escalation), whose reason always went
    # (docs/workplace.md, "Canned reasons").
    reason_codes = models.JSONField(default=list, blank=True, db_default=[])
    reason_shared = models.BooleanField(null=True, blank=True)
    # A long text judged by parts (moderation.verdicts.parts_record, docs/workplace.md "Long
    # texts"): {"rule", "count", "whole": {category: score}, "crossed": [{"start", "end", "scores",
    # "level"}], "more"}: the policy's part rule, how many parts the model scored, the whole
    # text's own scores, and the parts that crossed a threshold (offsets into the text the rules
    # read, never its words). {} for a text judged whole (one sentence, a remote provider).
    parts = models.JSONField(default=dict, blank=True, db_default={})
    # Why a provider that explains itself (the `llm` provider) judged as it did
    # (moderation.providers.Rationale.record): {"category", "score", "text" (its words), "start",
    # "end" (the span it quoted, offsets into the text the rules read), "policy_version" (whose
    # definitions it read)}. {} for every other decision.
    rationale = models.JSONField(default=dict, blank=True, db_default={})
    created_at = models.DateTimeField(auto_now_add=True)

    objects = DecisionQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        constraints = [
            # A provider result decides a review at most once per operation.
            models.UniqueConstraint(
                fields=["request"], condition=Q(source="provider"), name="decision_one_per_request"
            ),
        ]
        # The workload and overturn figures read only moderators' decisions.
        indexes = [
            models.Index(fields=["created_at"], name="decision_moderator_idx", condition=Q(source="moderator")),
        ]

    def __str__(self) -> str:
        return f"{self.label} by {self.source}"

    @property
    def decided_by(self) -> str:
        if self.source == DecisionSource.MODERATOR:
            return f"moderator:{self.moderator}"
        if self.callback_id:
            return f"callback:{self.callback_id}"
        if self.request_id:
            return f"request:{self.request_id}"
        return self.source


class DecisionUndo(models.Model):
    """A moderator took back their decision (review_undo, docs/workplace.md "Undo"): the decision
    row stays as it was (invariant 9), and this row says it no longer stands, so no figure counts
    it (Decision.objects.standing). Written once, in the undo's transaction."""

    decision = models.OneToOneField(Decision, on_delete=models.PROTECT, primary_key=True, related_name="undo")
    moderator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"decision {self.decision_id} undone"


class RuleAction(models.TextChoices):
    """What a watched-term rule does when one of its terms matches."""

    REJECT = "reject", "Reject"
    MANUAL_REVIEW = "manual_review", "Manual review"
    ALLOW = "allow", "Allow (an exception to the other rules)"


class PartRule(models.TextChoices):
    """How a policy counts the scores of a long text's parts (moderation.verdicts.judged_scores).
    Whatever the rule, a category's score is never below the whole text's."""

    MAX = "max", "The worst part"
    TOP2_MEAN = "top2_mean", "The mean of the two worst parts"
    TOP3_MEAN = "top3_mean", "The mean of the three worst parts"
    WHOLE = "whole", "The whole text only"


# The languages the bundled model (moderation/providers/local.py) was trained and measured on
# (docs/model-card.md), and Malay, which it reads through Indonesian (unmeasured).
LOCAL_MODEL_LANGUAGES = ("ar", "de", "en", "fr", "id", "ms")


def default_model_languages() -> list[str]:
    """The bundled model's languages that the detector tells apart (MODERATION_LANGUAGES): a
    policy may only name those (moderation.validation)."""
    return [code for code in settings.MODERATION_LANGUAGES if code in LOCAL_MODEL_LANGUAGES]


# The violation categories a new installation starts with: the OpenAI moderation names the
# providers score (`harassment`, `violence`...), the local model's `insult`, `threat`, `hate`,
# `sexual` and `profanity` (the default term lists' too: moderation/data/terms), and `spam`,
# which no model here scores.
DEFAULT_CATEGORIES = ["harassment", "hate", "illicit", "insult", "profanity", "self-harm", "sexual", "spam", "threat",
                      "violence"]


def default_categories() -> list[str]:
    return list(DEFAULT_CATEGORIES)


DEFAULT_ENFORCEMENT_LADDER = [
    {"points": 3, "action": "warn"},
    {"points": 5, "action": "suspend", "days": 7},
    {"points": 8, "action": "ban"},
]


def default_enforcement_ladder() -> list[dict]:
    return [dict(rung) for rung in DEFAULT_ENFORCEMENT_LADDER]


class ModerationPolicy(models.Model):
    """A versioned mapping from category scores to a decision. Versions are never edited in place:
    a change publishes a new version, so every past decision still names the rules that made it.
    """

    version = models.PositiveIntegerField(unique=True)
    reject_threshold = models.FloatField(help_text="A category score at or above this rejects.")
    review_threshold = models.FloatField(help_text="A category score at or above this needs a human.")
    category_thresholds = models.JSONField(
        default=dict,
        blank=True,
        help_text='Per-category overrides, e.g. {"violence": {"reject": 0.7, "review": 0.3}}.',
    )
    flagged_label = models.CharField(
        max_length=16,
        choices=[(s.value, s.label) for s in DECISION_LABELS],
        default=ReviewStatus.MANUAL_REVIEW,
        help_text="Decision when the provider flags the content but no threshold is reached.",
    )
    report_threshold = models.PositiveSmallIntegerField(
        default=3, db_default=3,
        help_text="Distinct users reporting an approved decision that send the review to a human.",
    )
    # Watched-term rules, one per (category, action, language): see moderation.text.rules.
    term_lists = models.JSONField(
        default=list,
        blank=True,
        db_default=[],
        help_text='Rules: [{"category": "insult", "action": "reject", "language": "id", "terms": ["bodoh"]}].',
    )
    model_languages = models.JSONField(
        default=default_model_languages,
        blank=True,
        db_default=["en", "id", "ms"],
        help_text="Languages the model may judge (ISO 639-1 codes); empty: every language.",
    )
    unjudged_label = models.CharField(
        max_length=16,
        choices=[(ReviewStatus.MANUAL_REVIEW.value, "Manual review"), (ReviewStatus.APPROVED.value, "Approve")],
        default=ReviewStatus.MANUAL_REVIEW,
        db_default=ReviewStatus.MANUAL_REVIEW,
        help_text="Decision for a text in a language the model cannot judge when no rule matched.",
    )
    categories = models.JSONField(
        default=default_categories,
        blank=True,
        help_text="The violation categories a moderator chooses from (a rejection names one).",
    )
    # How the review queues are ordered (moderation.review_queues.priority): points for the model's top
    # category score (never an appeal's: it ranks by its own signals), for each distinct reporter
    # and for an appeal; waiting earns points too, so nothing starves behind a stream of urgent work.
    priority_score_weight = models.FloatField(default=100, help_text="Points for a top category score of 1.0.")
    priority_report_weight = models.FloatField(default=15, help_text="Points for each user report.")
    priority_appeal_weight = models.FloatField(default=40, help_text="Points for an appeal.")
    priority_age_points_per_hour = models.FloatField(
        default=10, help_text="Points a review earns for each hour it waits (above 0)."
    )
    # Authors (docs/design.md, "Authors, strikes and account actions"): the points a rejection
    # of each category counts (a category not listed counts 1), how long a strike counts, the
    # enforcement ladder, and what becomes of new content of a suspended or banned author.
    strike_points = models.JSONField(default=dict, blank=True, db_default={},
                                     help_text='Points per category, e.g. {"hate": 3}; others count 1.')
    strike_window_days = models.PositiveIntegerField(default=90, db_default=90)
    enforcement_ladder = models.JSONField(default=default_enforcement_ladder, blank=True,
                                          db_default=DEFAULT_ENFORCEMENT_LADDER)
    while_restricted = models.CharField(
        max_length=16,
        choices=[(ReviewStatus.MANUAL_REVIEW.value, "Manual review"), ("reject", "Reject")],
        default=ReviewStatus.MANUAL_REVIEW, db_default=ReviewStatus.MANUAL_REVIEW,
        help_text="New content of a suspended or banned author: waits for a human, or is rejected.",
    )
    priority_strike_weight = models.FloatField(
        default=5, db_default=5, help_text="Points for each active strike point of the content's author."
    )
    # Notices to the affected user (docs/design.md, "Statements of reasons"): how long a
    # restrictive decision or an account action may be appealed, and the policy's own wording.
    appeal_window_days = models.PositiveIntegerField(
        default=183, db_default=183, help_text="Days a rejection or an account action may be appealed (DSA Art. 20: six months)."
    )
    notice_templates = models.JSONField(
        default=dict, blank=True, db_default={},
        help_text='Notice text per language, e.g. {"en": "..."}, replacing the built-in en and id ones. '
                  "Placeholders: {category}, {reasons}, {policy_url}, {appealable_until}, {appeal_route}.",
    )
    # Reports (docs/design.md, "Reporters"): a user report still open after report_expiry_days
    # is told `expired`; more than pile_on_reports reports within pile_on_minutes mark a pile-on.
    report_expiry_days = models.PositiveIntegerField(
        default=30, db_default=30, help_text="Days a user report waits for a decision before it expires."
    )
    pile_on_reports = models.PositiveSmallIntegerField(
        default=4, db_default=4, help_text="This many reports of one review within pile_on_minutes mark a pile-on."
    )
    pile_on_minutes = models.PositiveSmallIntegerField(default=10, db_default=10)
    # Statements of reasons for the DSA Transparency Database (moderation.transparency.statements): each
    # category onto a DSA category, keywords, ground and visibility; the territorial scope; account
    # actions onto decision_account. Validated when published.
    dsa_mapping = models.JSONField(
        default=default_dsa_mapping, blank=True,
        help_text="Policy categories onto the DSA Transparency Database's vocabulary (docs/transparency.md).",
    )
    # Images (docs/design.md, "Images and hash banks"): the PDQ hash banks this version matches,
    # each [{"name", "category", "action": reject|manual_review, "never_display", "through"}]
    # (`through`: the last entry id it takes, moderation/models/media.py); how near a hash must
    # be to match; and what an image no bank matched and no provider judged becomes.
    hash_banks = models.JSONField(default=list, blank=True, db_default=[])
    # Canned reasons (docs/workplace.md, "Canned reasons"): per category (and "_approval"), the
    # reasons a moderator picks, each {"code", "texts": {language: text}} with an English text;
    # and whether an approval needs a reason (a canned one or free text).
    canned_reasons = models.JSONField(
        default=default_canned_reasons, blank=True,
        help_text='Per category, e.g. {"spam": [{"code": "scam", "texts": {"en": "...", "id": "..."}}]}; '
                  '"_approval" lists the reasons for approvals.',
    )
    approval_needs_reason = models.BooleanField(
        default=False, db_default=False, help_text="An approval needs a canned reason or free text."
    )
    pdq_distance = models.PositiveSmallIntegerField(
        default=31, db_default=31, help_text="A hash within this many bits (of 256) of a bank entry matches."
    )
    image_fallback = models.CharField(
        max_length=16,
        choices=[(ReviewStatus.MANUAL_REVIEW.value, "Manual review"), (ReviewStatus.APPROVED.value, "Approve")],
        default=ReviewStatus.MANUAL_REVIEW, db_default=ReviewStatus.MANUAL_REVIEW,
        help_text="An image no bank matched, with no image-capable provider.",
    )
    # Long texts (docs/workplace.md, "Long texts"): how the scores of a text's sentences count.
    part_rule = models.CharField(
        max_length=16, choices=PartRule.choices, default=PartRule.MAX, db_default=PartRule.MAX,
        help_text="How a long text's parts count: its worst part, the mean of its worst two or three, or the whole text only.",
    )
    # Routing rules (docs/workplace.md, "Routing rules and queue access"): ordered, the first
    # whose conditions all hold sends a review entering manual_review to its queue; none: the
    # cause's queue (moderation.review_queues.queue_entry). Validated when published.
    routing_rules = models.JSONField(
        default=list, blank=True, db_default=[],
        help_text='Ordered rules, e.g. [{"name": "Indonesian reports", "queue": "reports-id", '
                  '"when": {"language": ["id"], "report_kind": ["user"]}}]; the first match wins.',
    )
    # The written definition of each category (docs/providers.md): the `llm` provider's prompt,
    # versioned like every other field, so two wordings can be compared on the same decisions.
    # Keys are among `categories`; validated when published (moderation.validation).
    category_definitions = models.JSONField(
        default=default_category_definitions, blank=True, db_default=DEFAULT_CATEGORY_DEFINITIONS,
        help_text='What each category covers, in words, e.g. {"insult": "Words that demean a person ..."}: '
                  "the llm provider's prompt.",
    )
    # Moderator QA (docs/qa.md): the share of "Review next" that hands a moderator a golden item
    # (when one is left they never had), and the share of moderators' decisions a second
    # moderator reviews again, blind.
    qa_golden_rate = models.FloatField(
        default=0.05, db_default=0.05, help_text="Share (0 to 1) of \"Review next\" that hands out a golden item, when one is left."
    )
    qa_double_review_rate = models.FloatField(
        default=0.0, db_default=0.0, help_text="Share (0 to 1) of moderators' decisions that another moderator reviews again."
    )
    # Evidence (docs/legal-holds.md): a decision rejecting, or sending to a human, content in a
    # reportable category freezes a preservation snapshot in its transaction, kept this many days;
    # the urgent categories (a threat to someone's life or safety, DSA Art. 18) wait in the urgent
    # queue with a deadline in minutes. Both lists name categories of this policy.
    reportable_categories = models.JSONField(
        default=list, blank=True, db_default=[],
        help_text='Categories whose decisions freeze a preservation snapshot, e.g. ["child_safety", "threat_to_life"].',
    )
    snapshot_retention_days = models.PositiveIntegerField(
        default=365, db_default=365, help_text="Days a preservation snapshot is kept (US REPORT Act: one year)."
    )
    urgent_categories = models.JSONField(
        default=list, blank=True, db_default=[],
        help_text='Categories that threaten life or safety: the urgent queue, e.g. ["threat_to_life"].',
    )
    urgent_deadline_minutes = models.PositiveIntegerField(
        default=60, db_default=60, help_text="Minutes within which an urgent review is to be acted on."
    )
    notes = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # A draft acts on nothing (docs/quality.md, "Drafts"): backtests and shadow runs judge with it,
    # and activating it (moderation.services.policy.policy_activate, one guarded and audited step)
    # makes it the active version. `drafted_from`: the active version it was made from; it can be
    # activated only while that one is still the active version.
    is_draft = models.BooleanField(default=False, db_default=False)
    drafted_from = models.PositiveIntegerField(null=True, blank=True)
    activated_at = models.DateTimeField(null=True, blank=True)
    activated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    history = HistoricalRecords(get_user=history_user)

    class Meta:
        ordering = ["-version"]
        verbose_name_plural = "moderation policies"
        constraints = [
            models.CheckConstraint(
                condition=Q(review_threshold__gte=0)
                & Q(reject_threshold__lte=1)
                & Q(review_threshold__lte=models.F("reject_threshold")),
                name="policy_thresholds_ordered",
            ),
            models.CheckConstraint(condition=Q(report_threshold__gte=1), name="policy_report_threshold_positive"),
        ]
        # The active version is the newest that is not a draft: read on every decision.
        indexes = [models.Index(fields=["-version"], name="policy_published_idx", condition=Q(is_draft=False))]

    def __str__(self) -> str:
        return f"policy v{self.version}" + (" (draft)" if self.is_draft else "")


__all__ = ["history_user", "REVIEW_HISTORY", "SHORT_ID_LENGTH", "short_id_expression", "TEXT_SEARCH_CONFIGS", "FALLBACK_TEXT_SEARCH_CONFIG", "ApiClient", "ResultOutcome", "ContentKind", "Content", "ReviewStatus", "Cause", "ContentReview", "RequestStatus", "ModerationRequest", "AttemptOutcome", "ProviderAttempt", "CircuitState", "ProviderCircuit", "DecisionSource", "Decision", "DecisionUndo", "standing_decision_sql", "ReviewQueue", "ModerationPolicy", "RuleAction", "PartRule", "default_model_languages", "LOCAL_MODEL_LANGUAGES", "DEFAULT_CATEGORIES", "default_categories", "DEFAULT_ENFORCEMENT_LADDER", "default_enforcement_ladder", "FINAL_STATUSES", "DECISION_LABELS", "TRANSITION_FOR_CAUSE", "LABELLED_CAUSES", "OPEN_REQUEST_STATUSES", "PROVIDER_FAILURES"]
