"""Statements of reasons for the EU DSA Transparency Database: an outbox (docs/transparency.md).

One row per restriction: each rejection that restricts a content (decision) and each suspension
or ban (account action), written in its transaction. Its `puid` is the decision's or the
action's id (a generated column: it cannot drift from the row it names) and never changes.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from django.db import models
from django.db.models import Q
from django.db.models.functions import Cast, Coalesce

VOCABULARY_PATH = Path(__file__).parent.parent / "data" / "dsa_vocabulary.json"
INCOMPATIBLE = "DECISION_GROUND_INCOMPATIBLE_CONTENT"


@cache
def vocabulary() -> dict[str, Any]:
    """The database's enumerations (moderation/data/dsa_vocabulary.json, its source commit named)."""
    return json.loads(VOCABULARY_PATH.read_text(encoding="utf-8"))


def _entry(category: str, keywords: list[str], ground_text: str, explanation: str) -> dict[str, Any]:
    return {"category": category, "keywords": keywords, "ground": INCOMPATIBLE, "ground_text": ground_text,
            "explanation": explanation, "visibility": "DECISION_VISIBILITY_CONTENT_REMOVED"}


def default_dsa_mapping() -> dict[str, Any]:
    """The mapping a new installation starts with: the default categories onto the database's
    2025 categories, every ground the platform's terms of service, the whole EEA."""
    terms = "The platform's terms of service"
    return {
        "territorial_scope": list(vocabulary()["EUROPEAN_ECONOMIC_AREA_COUNTRY_CODES"]),
        "categories": {
            "harassment": _entry("STATEMENT_CATEGORY_CYBER_VIOLENCE", ["KEYWORD_CYBER_HARASSMENT"],
                                 f"{terms}: harassment", "The content harasses or intimidates a person."),
            "hate": _entry("STATEMENT_CATEGORY_ILLEGAL_OR_HARMFUL_SPEECH", ["KEYWORD_HATE_SPEECH"],
                           f"{terms}: hateful conduct", "The content attacks people for who they are."),
            # The default term lists' categories (moderation/data/terms): an insult aims at a
            # person, a threat of violence at a person's safety.
            "insult": _entry("STATEMENT_CATEGORY_CYBER_VIOLENCE", ["KEYWORD_CYBER_BULLYING_INTIMIDATION"],
                             f"{terms}: insults", "The content insults or demeans a person."),
            "threat": _entry("STATEMENT_CATEGORY_VIOLENCE", ["KEYWORD_INCITEMENT_VIOLENCE_HATRED"],
                             f"{terms}: threats", "The content threatens a person with violence."),
            "illicit": _entry("STATEMENT_CATEGORY_UNSAFE_AND_PROHIBITED_PRODUCTS", ["KEYWORD_PROHIBITED_PRODUCTS"],
                              f"{terms}: illicit goods and activities",
                              "The content promotes illicit goods or activities."),
            "profanity": _entry("STATEMENT_CATEGORY_OTHER_VIOLATION_TC", [], f"{terms}: profanity",
                                "The content uses abusive or profane language."),
            "self-harm": _entry("STATEMENT_CATEGORY_SELF_HARM", ["KEYWORD_SELF_MUTILATION"],
                                f"{terms}: self-harm", "The content promotes or depicts self-harm."),
            "sexual": _entry("STATEMENT_CATEGORY_OTHER_VIOLATION_TC", ["KEYWORD_ADULT_SEXUAL_MATERIAL"],
                             f"{terms}: sexual content", "The content is sexual material the platform does not allow."),
            "spam": _entry("STATEMENT_CATEGORY_OTHER_VIOLATION_TC", [], f"{terms}: spam",
                           "The content is spam."),
            "violence": _entry("STATEMENT_CATEGORY_VIOLENCE", ["KEYWORD_INCITEMENT_VIOLENCE_HATRED"],
                               f"{terms}: violence", "The content threatens, incites or glorifies violence."),
        },
        # A category the mapping does not list (a new one, or none: a rejection naming no category).
        "default": _entry("STATEMENT_CATEGORY_OTHER_VIOLATION_TC", [], terms,
                          "The content breaks the platform's terms of service."),
        "accounts": {"suspend": "DECISION_ACCOUNT_SUSPENDED", "ban": "DECISION_ACCOUNT_TERMINATED"},
    }




class StatementStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    SUBMITTED = "submitted", "Submitted"
    REJECTED = "rejected", "Rejected by the database"


class TransparencyStatement(models.Model):
    decision = models.OneToOneField("moderation.Decision", on_delete=models.PROTECT, null=True, blank=True,
                                    related_name="transparency_statement")
    account_action = models.OneToOneField("moderation.AccountAction", on_delete=models.PROTECT, null=True,
                                          blank=True, related_name="transparency_statement")
    puid = models.GeneratedField(
        expression=Coalesce(Cast("decision_id", models.TextField()), Cast("account_action_id", models.TextField())),
        output_field=models.TextField(), db_persist=True, unique=True,
    )
    # The review it restricts (NULL for an account action): a later decision overturning the
    # restriction finds its statement by it.
    review = models.ForeignKey("moderation.ContentReview", on_delete=models.PROTECT, null=True, blank=True,
                               related_name="+", db_index=False)
    # What it was built from (moderation.transparency.statements): the audit trail's facts, fixed with the
    # decision, and the policy version whose mapping built `body`.
    facts = models.JSONField()
    policy = models.ForeignKey("moderation.ModerationPolicy", on_delete=models.PROTECT, related_name="+")
    body = models.JSONField(help_text="The statement as sent (its puid included).")
    # Facts the transparency report counts, as columns (moderation/transparency/report.py).
    dsa_category = models.CharField(max_length=64)
    automated_decision = models.CharField(max_length=40)
    source_type = models.CharField(max_length=40)
    status = models.CharField(max_length=16, choices=StatementStatus.choices, default=StatementStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    locked_until = models.DateTimeField(null=True, blank=True, help_text="A send is in flight until then.")
    last_error = models.TextField(blank=True)
    errors = models.JSONField(default=dict, blank=True, help_text="The database's errors, when it refused it.")
    # The database's answer: its uuid for the statement (NULL when it said it had the puid already).
    tdb_uuid = models.CharField(max_length=64, blank=True)
    already_stored = models.BooleanField(default=False, help_text="The database answered that it had this puid.")
    created_at = models.DateTimeField(auto_now_add=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    requeued_at = models.DateTimeField(null=True, blank=True)
    # A correction (the database has no update): the decision that overturned the restriction, or
    # the account appeal's overturn; the transparency report counts these.
    overturned_at = models.DateTimeField(null=True, blank=True)
    overturned_by = models.ForeignKey("moderation.Decision", on_delete=models.PROTECT, null=True, blank=True,
                                      related_name="+")

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(decision__isnull=False, account_action__isnull=True, review__isnull=False)
                | Q(decision__isnull=True, account_action__isnull=False, review__isnull=True),
                name="statement_of_one_restriction",
            ),
        ]
        indexes = [
            # The sender's scan: pending statements by when they are due (NULL: at once).
            models.Index(fields=["next_attempt_at", "id"], name="statement_pending_idx", condition=Q(status="pending")),
            models.Index(fields=["review", "id"], name="statement_review_idx", condition=Q(review__isnull=False)),
            models.Index(fields=["status", "created_at"], name="statement_status_idx"),
            # The transparency report: a period's statements.
            models.Index(fields=["created_at"], name="statement_created_idx"),
            # The transparency report's corrections: the statements overturned in a period.
            models.Index(fields=["overturned_at"], name="statement_overturned_idx",
                         condition=Q(overturned_at__isnull=False)),
        ]
        permissions = [("requeue_statement", "Can re-queue a statement the Transparency Database refused")]

    def __str__(self) -> str:
        return f"statement {self.puid} ({self.status})"
