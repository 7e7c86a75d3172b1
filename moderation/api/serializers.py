from __future__ import annotations

import json

from rest_framework import serializers

from moderation.observability import timeline
from moderation.models import ContentKind, ContentReview, Decision, ReviewStatus, RuleAction

TEXT_MAX_CHARS = 100_000
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


class ReviewSubmitSerializer(serializers.Serializer):
    external_id = StrictCharField(max_length=255)
    content_type = serializers.ChoiceField(choices=ContentKind.choices)
    text = StrictCharField(required=False, allow_blank=True, max_length=TEXT_MAX_CHARS, trim_whitespace=False)
    media_url = serializers.URLField(required=False, max_length=2048)

    def validate_media_url(self, value):
        if not value.lower().startswith(("http://", "https://")):
            raise serializers.ValidationError("Only http(s) URLs can be fetched.")
        return value
    metadata = serializers.JSONField(required=False)

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
        required = {
            ContentKind.TEXT: "text",
            ContentKind.IMAGE: "media_url",
            ContentKind.AUDIO: "media_url",
            ContentKind.METADATA: "metadata",
        }[kind]
        if not attrs.get(required):
            raise serializers.ValidationError({required: [f"This field is required for {kind} content."]})
        if attrs.get("text") and attrs.get("media_url"):
            raise serializers.ValidationError({"media_url": ["Send either text or media_url, not both."]})
        if kind == ContentKind.TEXT and not attrs["text"].strip():
            raise serializers.ValidationError({"text": ["Text content may not be blank."]})
        return attrs


class RuleMatchSerializer(serializers.Serializer):
    """A watched-term rule of the policy that matched the content (moderation.rules.RuleMatch)."""

    rule = serializers.CharField(help_text='"category:action" or "category:action:language".')
    category = serializers.CharField()
    action = serializers.ChoiceField(choices=RuleAction.choices)
    term = serializers.CharField(help_text="The term of the policy's list that matched.")


class DecisionSerializer(serializers.ModelSerializer):
    policy_version = serializers.IntegerField(source="policy.version", allow_null=True, default=None)
    decided_by = serializers.CharField(read_only=True)
    rules = RuleMatchSerializer(source="rule_matches", many=True, read_only=True)

    class Meta:
        model = Decision
        fields = [
            "label",
            "source",
            "decided_by",
            "score",
            "flagged",
            "categories",
            "category_scores",
            "model",
            "policy_version",
            "explanation",
            "rules",
            "model_used",
            "reason",
            "created_at",
        ]


class ReviewSerializer(serializers.ModelSerializer):
    external_id = serializers.CharField(source="content.external_id")
    content_type = serializers.CharField(source="content.kind")
    language = serializers.CharField(
        source="content.language", help_text="Detected language (ISO 639-1); empty when unsure or not yet decided."
    )
    decision = DecisionSerializer(allow_null=True)

    class Meta:
        model = ContentReview
        fields = [
            "id",
            "external_id",
            "content_type",
            "language",
            "status",
            "version",
            "decision",
            "provider_request_id",
            "created_at",
            "updated_at",
            "processing_started_at",
            "completed_at",
        ]
        read_only_fields = fields


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
