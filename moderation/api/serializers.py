from __future__ import annotations

import base64
import binascii
import json
import unicodedata

from django.conf import settings

from rest_framework import serializers
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field

from moderation.media.images import DecodeBounds, MediaRefused, image_inspect
from moderation.models import (
    APPEAL_STATEMENT_MAX,
    AUTHOR_ID_MAX,
    DECISION_LABELS,
    OTHER_REASON,
    REPORT_DETAIL_MAX,
    REPORTER_ID_MAX,
    AppealStatus,
    ContentKind,
    ContentReview,
    Decision,
    DecisionSource,
    ReportKind,
    ReviewStatus,
    RuleAction,
)
from moderation.observability import timeline
from moderation.validation import policy_categories
from moderation.transparency.reasons import statement_of_reasons

TEXT_MAX_CHARS = 100_000
EXTERNAL_ID_MAX = 255
METADATA_MAX_BYTES = 64 * 1024
METADATA_MAX_DEPTH = 10


def _check_json_value(value, depth: int = 0) -> None:
    """PostgreSQL's jsonb cannot store NUL characters or lone surrogates (not valid Unicode),
    and deep nesting is abuse, not metadata."""
    if depth > METADATA_MAX_DEPTH:
        raise serializers.ValidationError(f"nested deeper than {METADATA_MAX_DEPTH} levels")
    if isinstance(value, str):
        if "\x00" in value:
            raise serializers.ValidationError("strings may not contain NUL characters")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise serializers.ValidationError("strings must be valid Unicode (no lone surrogates)") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_json_value(key, depth + 1)
            _check_json_value(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_json_value(item, depth + 1)


class StrictCharField(serializers.CharField):
    """A string field that refuses numbers and booleans instead of quietly converting them."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class AuthorIdField(StrictCharField):
    """The client's id of an author: 1 to AUTHOR_ID_MAX characters, taken as written (not trimmed:
    " ann" and "ann" are two authors), no control characters (Unicode Cc). Like every string the
    API takes, it may hold no lone surrogate (DRF's own validator); format characters (Cf) are
    allowed, as in an external_id: an emoji sequence joins with one."""

    def __init__(self, **kwargs):
        kwargs.setdefault("help_text", "Your id of the content's author (1 to 255 characters, no control characters). "
                                       "The same id sent by two clients names two authors.")
        super().__init__(max_length=AUTHOR_ID_MAX, trim_whitespace=False, **kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if has_control_characters(value):
            raise serializers.ValidationError("An author_id may not contain control characters.")
        return value


def has_control_characters(value: str) -> bool:
    """Whether `value` holds a control character (Unicode Cc), which no author id may."""
    return any(unicodedata.category(c) == "Cc" for c in value)


class Base64Field(serializers.CharField):
    """A CharField without DRF's lone-surrogate check, which reads every character in Python
    (~27 ms for the base64 of a 150 KB image, as long as the request's other work ten times over).
    Such a value is not base64 anyway: b64decode refuses any character outside its alphabet,
    in C, before anything uses it (ReviewSubmitSerializer.validate_image_base64)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.validators = [v for v in self.validators if not isinstance(v, ProhibitSurrogateCharactersValidator)]


class ReviewSubmitSerializer(serializers.Serializer):
    external_id = StrictCharField(max_length=EXTERNAL_ID_MAX)
    author_id = AuthorIdField(required=False, allow_null=True)
    content_type = serializers.ChoiceField(choices=ContentKind.choices)
    text = StrictCharField(required=False, allow_blank=True, max_length=TEXT_MAX_CHARS, trim_whitespace=False)
    media_url = serializers.URLField(required=False, max_length=2048)
    # The image's bytes, base64: its header checked here (moderation.media.images), decoded and hashed in the job.
    image_base64 = Base64Field(required=False, trim_whitespace=False, max_length=None)

    def validate_media_url(self, value):
        if not value.lower().startswith(("http://", "https://")):
            raise serializers.ValidationError("Only http(s) URLs can be fetched.")
        return value
    metadata = serializers.JSONField(required=False)

    def validate_image_base64(self, value):
        """The bytes, decoded (base64), and the image's header, checked against what decoding it
        may cost (moderation.media.images.image_inspect: no pixel is decoded here, the job decodes it
        once): `(bytes, ImageHeader)`. A 400 says why."""
        if len(value) > (settings.MEDIA_MAX_BYTES + 2) // 3 * 4 + 4:
            raise serializers.ValidationError(f"The image is larger than {settings.MEDIA_MAX_BYTES} bytes.")
        try:
            data = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise serializers.ValidationError("Not valid base64 (the standard alphabet, padded).") from None
        try:
            header = image_inspect(data, bounds=DecodeBounds.from_settings())
        except MediaRefused as exc:
            raise serializers.ValidationError(f"{str(exc)[:1].upper()}{str(exc)[1:]}.") from None
        return data, header

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return super().to_internal_value(data)

    def validate_metadata(self, value):
        if not isinstance(value, dict):
            raise serializers.ValidationError("metadata must be a JSON object")
        _check_json_value(value)
        if len(json.dumps(value)) > METADATA_MAX_BYTES:
            raise serializers.ValidationError(f"metadata is larger than {METADATA_MAX_BYTES} bytes")
        return value

    def validate(self, attrs):
        kind = attrs["content_type"]
        if kind == ContentKind.IMAGE:
            if attrs.get("image_base64") and attrs.get("media_url"):
                raise serializers.ValidationError({"image_base64": ["Send either image_base64 or media_url, not both."]})
            if not attrs.get("image_base64") and not attrs.get("media_url"):
                raise serializers.ValidationError(
                    {"media_url": ["media_url or image_base64 is required for image content."]})
        elif attrs.get("image_base64"):
            raise serializers.ValidationError({"image_base64": ["Only image content carries image_base64."]})
        else:
            required = {ContentKind.TEXT: "text", ContentKind.AUDIO: "media_url", ContentKind.METADATA: "metadata"}[kind]
            if not attrs.get(required):
                raise serializers.ValidationError({required: [f"This field is required for {kind} content."]})
        if attrs.get("text") and attrs.get("media_url"):
            raise serializers.ValidationError({"media_url": ["Send either text or media_url, not both."]})
        if attrs.get("text") and attrs.get("image_base64"):
            raise serializers.ValidationError({"image_base64": ["Send either text or image_base64, not both."]})
        if kind == ContentKind.TEXT and not attrs["text"].strip():
            raise serializers.ValidationError({"text": ["Text content may not be blank."]})
        return attrs


class ReasonSerializer(serializers.Serializer):
    category = serializers.CharField()
    score = serializers.FloatField(allow_null=True, help_text="The category's score, when a model scored it.")
    rule = serializers.CharField(required=False, help_text='The watched-term rule that decided, if one did, or the hash '
                                                          'bank ("bank:NAME") whose entry an image matched.')
    term = serializers.CharField(required=False, help_text="The term of the rule's list that matched.")
    distance = serializers.IntegerField(required=False, help_text="For a hash bank: the bits (of 256) between the "
                                                                  "image's PDQ hash and the entry's.")


class RuleMatchSerializer(serializers.Serializer):
    """A watched-term rule of the policy that matched the content (moderation.text.rules.RuleMatch)."""

    rule = serializers.CharField(help_text='"category:action" or "category:action:language".')
    category = serializers.CharField()
    action = serializers.ChoiceField(choices=RuleAction.choices)
    term = serializers.CharField(help_text="The term of the policy's list that matched.")


class NoticeSerializer(serializers.Serializer):
    """The notice for the affected user (moderation.transparency.notices): the policy's template, rendered."""

    language = serializers.CharField(help_text="The content's language if the policy has a template for it, else en.")
    text = serializers.CharField()


class DecisionSerializer(serializers.Serializer):
    """A decision as a statement of reasons: why, under which policy version, decided by which
    role. It names no person and no internal error."""

    # Rendered by moderation.transparency.reasons, the one builder the timeline API and the notifications use
    # too (docs/design.md, invariant 14); the fields below document it for the schema.

    label = serializers.ChoiceField(choices=[(s.value, s.label) for s in DECISION_LABELS])
    decided_by = serializers.ChoiceField(choices=DecisionSource.choices, help_text="A role, never a person.")
    source = serializers.ChoiceField(choices=DecisionSource.choices, help_text="The same as `decided_by`.")
    automated = serializers.BooleanField(help_text="False when a moderator decided.")
    reasons = ReasonSerializer(many=True)
    policy_version = serializers.IntegerField(allow_null=True)
    explanation = serializers.CharField()
    score = serializers.FloatField(allow_null=True, help_text="The highest category score, if scored.")
    flagged = serializers.BooleanField(allow_null=True)
    categories = serializers.DictField(child=serializers.BooleanField())
    category_scores = serializers.DictField(child=serializers.FloatField())
    model = serializers.CharField()
    model_used = serializers.BooleanField(
        allow_null=True, help_text="Whether the model's scores counted (false: a language the policy says it cannot judge)."
    )
    rules = RuleMatchSerializer(many=True, help_text="The policy's watched-term rules that matched.")
    created_at = serializers.DateTimeField()
    appealable_until = serializers.DateTimeField(
        allow_null=True, help_text="The end of the appeal window of a rejection (null: nothing was restricted)."
    )
    notice = NoticeSerializer(allow_null=True, help_text="What to tell the affected user (null: nothing was restricted).")

    def to_representation(self, instance: Decision) -> dict:
        return statement_of_reasons(instance)


class AppealSummarySerializer(serializers.Serializer):
    id = serializers.UUIDField()
    status = serializers.ChoiceField(choices=AppealStatus.choices)
    created_at = serializers.DateTimeField()
    resolved_at = serializers.DateTimeField(allow_null=True)


class ReviewSerializer(serializers.ModelSerializer):
    external_id = serializers.CharField(source="content.external_id")
    content_type = serializers.ChoiceField(source="content.kind", choices=ContentKind.choices)
    language = serializers.CharField(
        source="content.language", help_text="Detected language (ISO 639-1); empty when unsure or not yet decided."
    )
    decision = DecisionSerializer(allow_null=True)
    content_erased_at = serializers.DateTimeField(
        source="content.erased_at", allow_null=True, help_text="When the content was erased (null: it was not)."
    )
    author_id = serializers.SerializerMethodField(help_text="Your id of the content's author (null: none was sent).")
    report_count = serializers.SerializerMethodField(help_text="Distinct users who reported the review.")
    appeal = serializers.SerializerMethodField(help_text="The review's latest appeal, if any.")

    class Meta:
        model = ContentReview
        fields = [
            "id",
            "external_id",
            "author_id",
            "content_type",
            "language",
            "status",
            "version",
            "decision",
            "report_count",
            "appeal",
            "provider_request_id",
            "created_at",
            "updated_at",
            "processing_started_at",
            "completed_at",
            "content_erased_at",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_author_id(self, review: ContentReview) -> str | None:
        # A new review's answer names its author without this (moderation/api/fast.py).
        return None if review.author_id is None else review.author.author_id  # select_related by the API

    @extend_schema_field(OpenApiTypes.INT)
    def get_report_count(self, review: ContentReview) -> int:
        counted = getattr(review, "report_count", None)  # annotated by the API's queryset
        return review.reports.count() if counted is None else counted

    @extend_schema_field(AppealSummarySerializer(allow_null=True))
    def get_appeal(self, review: ContentReview) -> dict | None:
        latest = getattr(review, "latest_appeals", None)  # prefetched by the API's queryset
        if latest is None:
            latest = list(review.appeals.order_by("-created_at")[:1])
        return AppealSummarySerializer(latest[0]).data if latest else None

    def to_representation(self, review: ContentReview) -> dict:
        if review.decision is not None:
            # The decision's review is this one, whose content the API selected: the statement
            # reads the notice's language from it with no query of its own.
            review.decision.review = review
        return super().to_representation(review)


class ReportCreateSerializer(serializers.Serializer):
    reporter_id = StrictCharField(max_length=REPORTER_ID_MAX, help_text="Your user who reports.")
    reason = StrictCharField(max_length=64, help_text='One of the active policy\'s categories, or "other".')
    detail = StrictCharField(max_length=REPORT_DETAIL_MAX, required=False, allow_blank=True, trim_whitespace=False)
    kind = serializers.ChoiceField(
        choices=ReportKind.choices, required=False, default=ReportKind.USER,
        help_text="`user` counts toward the threshold; `dsa_notice` (DSA Art. 16) and `trusted_flagger` "
                  "(Art. 22) send the review to a human whatever the threshold, trusted flaggers first. "
                  "You vouch for it, as for the reporter.",
    )

    def validate_reason(self, value: str) -> str:
        allowed = [*policy_categories(self.context["policy"]), OTHER_REASON]
        if value not in allowed:
            raise serializers.ValidationError(f"Not a category of the policy; use one of: {', '.join(allowed)}.")
        return value


class ReportSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="report.id")
    review_id = serializers.UUIDField(source="report.review_id")
    reporter_id = serializers.CharField(source="report.reporter_id")
    reason = serializers.CharField(source="report.reason")
    kind = serializers.ChoiceField(source="report.kind", choices=ReportKind.choices)
    created_at = serializers.DateTimeField(source="report.created_at")
    report_count = serializers.IntegerField(help_text="Distinct users who reported the review, this one included.")


class AppealCreateSerializer(serializers.Serializer):
    appellant_id = StrictCharField(max_length=REPORTER_ID_MAX, help_text="Your user who appeals.")
    statement = StrictCharField(max_length=APPEAL_STATEMENT_MAX, trim_whitespace=False,
                                help_text="Why the decision is wrong, in the user's words.")


class AppealSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    review_id = serializers.UUIDField()
    status = serializers.ChoiceField(choices=AppealStatus.choices)
    created_at = serializers.DateTimeField()


class ReviewListQuerySerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=ReviewStatus.choices, required=False)


class TimelineEntrySerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    kind = serializers.ChoiceField(choices=timeline.KINDS)
    title = serializers.CharField()
    detail = serializers.DictField()
    ids = serializers.DictField(child=serializers.CharField(), help_text="Correlation ids.")
    source = serializers.CharField(help_text="<table>:<id> of the record.")
    payload = serializers.CharField(allow_null=True, help_text="A callback's raw body.")
