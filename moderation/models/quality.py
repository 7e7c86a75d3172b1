"""How good the judging is (docs/quality.md): backtests of a policy version over what moderators
decided, the provider answers they keep so that a second run asks nothing again, and shadow runs
of a version beside the active one on live traffic.

None of these rows is ever read by the live path: a backtest or a shadow writes here and nowhere
else (no review, decision, notification or statement).
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import models


class BacktestStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    CANCELLED = "cancelled", "Cancelled"
    FAILED = "failed", "Failed"


BACKTEST_LIVE_STATUSES = (BacktestStatus.QUEUED, BacktestStatus.RUNNING)


class Backtest(models.Model):
    """A policy version (the candidate, usually a draft) replayed over the reviews moderators
    decided, beside the version that was active when it started (the baseline). Written by
    moderation/services/backtests.py only."""

    candidate = models.ForeignKey("moderation.ModerationPolicy", on_delete=models.PROTECT, related_name="backtests")
    baseline = models.ForeignKey("moderation.ModerationPolicy", on_delete=models.PROTECT, related_name="+")
    provider = models.CharField(max_length=32)
    since = models.DateTimeField(null=True, blank=True, help_text="Human decisions from this time on (none: all).")
    limit = models.PositiveIntegerField(null=True, blank=True, help_text="At most this many, newest first.")
    data = models.CharField(max_length=500, blank=True, help_text="A labelled file judged instead of the reviews.")
    status = models.CharField(max_length=16, choices=BacktestStatus.choices, default=BacktestStatus.QUEUED)
    total = models.PositiveIntegerField(default=0)
    judged = models.PositiveIntegerField(default=0)
    cached = models.PositiveIntegerField(default=0, help_text="Answers read from the cache, not asked again.")
    provider_seconds = models.FloatField(default=0.0, help_text="Time spent waiting for the provider.")
    # evaluate_policy's figures (figures_json) of the candidate and of the baseline on the same texts.
    figures = models.JSONField(default=dict, blank=True)
    baseline_figures = models.JSONField(default=dict, blank=True)
    # The reviews whose decision the candidate changes: [{review, human, baseline, candidate, score}].
    changes = models.JSONField(default=list, blank=True)
    changed = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    # Last sign of a worker: a live backtest silent for longer than a task's lease lost its worker,
    # and the sweep enqueues it again (backtests_resume). It writes nothing else, so it starts over.
    beat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status", "beat_at"], name="backtest_live_idx"),
                   models.Index(fields=["candidate", "-finished_at"], name="backtest_candidate_idx")]

    def __str__(self) -> str:
        return f"backtest {self.pk} of policy v{self.candidate.version}"

    @property
    def percent(self) -> int:
        return int(100 * self.judged / self.total) if self.total else (100 if self.status == BacktestStatus.DONE else 0)


class BacktestItem(models.Model):
    """One example of a backtest, frozen when it started (a review a moderator decided, or a row
    of a labelled file), and, once judged, what each version decided of it. A worker takes the
    pending ones a chunk at a time, so a backtest resumes where a killed worker left it."""

    backtest = models.ForeignKey(Backtest, on_delete=models.CASCADE, related_name="items")
    position = models.PositiveIntegerField()
    review = models.ForeignKey("moderation.ContentReview", on_delete=models.DO_NOTHING, db_constraint=False,
                               null=True, blank=True, related_name="+")
    text = models.TextField(blank=True, help_text="A file's row only: a review's text is read from its content.")
    label = models.BooleanField(help_text="True: it should not be approved (a moderator rejected it).")
    language = models.CharField(max_length=64, blank=True)
    category = models.CharField(max_length=64, blank=True)
    done = models.BooleanField(default=False)
    # [outcome, score, category, rules, error] of the candidate and of the baseline.
    candidate = models.JSONField(null=True, blank=True)
    baseline = models.JSONField(null=True, blank=True)
    # The worker judging it (moderation/quality/backtests.py): a lease, not a lock held while the
    # provider judges (docs/design.md, invariant 6); once it has run out another worker takes it.
    lease = models.UUIDField(null=True, blank=True)
    leased_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["backtest", "position"], name="backtest_item_position")]
        indexes = [models.Index(fields=["backtest", "done", "position"], name="backtest_item_next_idx")]

    def __str__(self) -> str:
        return f"example {self.position} of backtest {self.backtest_id}"


class ProviderAnswer(models.Model):
    """A provider's answer for a text, kept for backtests and shadow runs: the same text, model
    and model version (`key`, a digest of the three) are not asked again. Live reviews never
    read it. Pruned after PROVIDER_ANSWER_RETENTION_DAYS (docs/operations.md, "Retention")."""

    key = models.CharField(max_length=64, primary_key=True)
    model = models.CharField(max_length=200)
    result = models.JSONField()
    # The text's own digest: erasure deletes the answers about a content it erases (a provider's
    # rationale quotes the text), whatever model gave them (moderation/privacy/erasure.py).
    text_digest = models.CharField(max_length=64, db_index=True, blank=True, default="", db_default="")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    def __str__(self) -> str:
        return f"{self.model} answer {self.key[:12]}"

    @staticmethod
    def digest_of(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class ShadowRun(models.Model):
    """A policy version judging live traffic beside the active one, acting on nothing: each
    review the platform decides is judged again by the shadow, later and outside the live
    decision's transaction (moderation/services/shadows.py), from `cursor` on."""

    policy = models.ForeignKey("moderation.ModerationPolicy", on_delete=models.PROTECT, related_name="shadows")
    provider = models.CharField(max_length=32)
    started_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="+")
    started_at = models.DateTimeField(auto_now_add=True)
    stopped_at = models.DateTimeField(null=True, blank=True)
    # The last provider decision judged (their ids grow): the next pass takes the ones after it.
    cursor = models.BigIntegerField(default=0)
    judged = models.PositiveIntegerField(default=0)
    errors = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    # The worker judging the batch after `cursor` (moderation/quality/shadows.py): it holds no lock
    # while its provider judges (docs/design.md, invariant 6), only this lease, which a killed
    # worker's successor takes over once it has run out.
    lease = models.UUIDField(null=True, blank=True)
    leased_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["policy", "provider"], condition=models.Q(stopped_at__isnull=True),
                                               name="shadow_one_live_per_policy_provider")]

    def __str__(self) -> str:
        return f"shadow of policy v{self.policy.version} ({self.provider})"


class ShadowVerdict(models.Model):
    """What the shadow decided of one review, beside what the live policy decided of it."""

    shadow = models.ForeignKey(ShadowRun, on_delete=models.CASCADE, related_name="verdicts")
    review = models.ForeignKey("moderation.ContentReview", on_delete=models.DO_NOTHING, db_constraint=False,
                               related_name="+")
    decision = models.BigIntegerField(help_text="The live provider decision it was judged beside.")
    live_label = models.CharField(max_length=16)
    label = models.CharField(max_length=16)
    category = models.CharField(max_length=64, blank=True)
    score = models.FloatField(null=True, blank=True)
    error = models.TextField(blank=True, help_text="The shadow's provider failed: counted as sent to a human.")
    language = models.CharField(max_length=16, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["shadow", "decision"], name="shadow_verdict_once")]
        indexes = [models.Index(fields=["shadow", "-created_at"], name="shadow_verdict_newest_idx")]

    def __str__(self) -> str:
        return f"shadow {self.shadow_id} on review {self.review_id}: {self.label} (live {self.live_label})"

    @property
    def agrees(self) -> bool:
        return self.label == self.live_label


class DecisionRollup(models.Model):
    """Automatic decisions counted per hour: by label (`label:rejected`) and by the rules that
    matched them (`rule:<name>`), for the anomaly alarms (moderation/quality/alarms.py). Filled a
    minute behind the live path by a scheduled task, never by the live path itself."""

    hour = models.DateTimeField()
    key = models.CharField(max_length=300)
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["hour", "key"], name="rollup_hour_key")]

    def __str__(self) -> str:
        return f"{self.key} at {self.hour:%Y-%m-%d %H}:00: {self.count}"


class QualityCursor(models.Model):
    """How far a scheduled quality task has read the provider decisions (their ids grow)."""

    name = models.CharField(max_length=32, primary_key=True)
    last_id = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.name} at decision {self.last_id}"
