"""The submission's hot path without DRF's per-request work (docs/design.md, "Hot paths").

A plain text submission (`content_type: "text"`, an external id, the text, an author id or
none) is most of what clients send. Its body is decoded and checked by a compiled msgspec
schema, and the new review's body is built directly, instead of instantiating and deep-copying
ReviewSubmitSerializer's and ReviewSerializer's fields for each request.

The serializers stay the contract. Each function here either gives exactly what the serializer
gives, or None, and then the serializer runs as before: every other kind of submission, every
body the serializer would refuse or change in a way not reproduced here, every error and its
body. tests/moderation/test_fast_paths.py checks, on arbitrary and hostile bodies, that
whatever this accepts the serializer accepts with the same data, and that the answers' bytes
are those of the serializers alone.
"""

from __future__ import annotations

import msgspec
from rest_framework import serializers

from moderation.api.serializers import EXTERNAL_ID_MAX, TEXT_MAX_CHARS, has_control_characters
from moderation.models import AUTHOR_ID_MAX, ContentKind, ContentReview

_UTF8 = ("utf-8", "utf8")  # the charsets DRF's JSON parser would decode as this does


class _TextSubmission(msgspec.Struct, forbid_unknown_fields=True):
    external_id: str
    content_type: str
    text: str
    author_id: str | None | msgspec.UnsetType = msgspec.UNSET


_decode = msgspec.json.Decoder(_TextSubmission).decode
_DATETIME = serializers.DateTimeField()  # DRF's own formatting of a date ("...Z")


def text_submission(request) -> dict | None:
    """What ReviewSubmitSerializer(data=request.data).validated_data would be for this request's
    body, if it is a plain text submission the serializer accepts; else None."""
    # Django's reading of the header (lower-cased, parameters apart): exactly JSON, in UTF-8 if
    # a charset is named. Any other media type or charset is for DRF's negotiation and parser.
    django_request = getattr(request, "_request", request)  # DRF's Request wraps Django's
    if django_request.content_type != "application/json" \
            or django_request.content_params.get("charset", "utf-8").lower() not in _UTF8:
        return None
    try:
        body = _decode(request.body)
    except (msgspec.DecodeError, UnicodeDecodeError):  # not this shape, not JSON, not UTF-8, a lone surrogate...
        return None
    external_id = body.external_id.strip()  # a CharField trims it (trim_whitespace)
    text, author_id = body.text, body.author_id
    if (
        body.content_type != ContentKind.TEXT
        or not external_id or len(external_id) > EXTERNAL_ID_MAX or "\x00" in external_id
        or len(text) > TEXT_MAX_CHARS or not text.strip() or "\x00" in text
    ):
        return None
    data = {"external_id": external_id, "content_type": ContentKind.TEXT.value, "text": text}
    if author_id is not msgspec.UNSET:
        if author_id is not None and (not author_id or len(author_id) > AUTHOR_ID_MAX
                                      or has_control_characters(author_id)):
            return None
        data["author_id"] = author_id
    return data


def created_review_body(review: ContentReview, *, author_id: str | None) -> dict:
    """ReviewSerializer(review).data for a review review_submit has just created: pending, no
    decision, report or appeal yet, its author the one named (`author_id`, not read back)."""
    content = review.content
    return {
        "id": str(review.pk),
        "external_id": content.external_id,
        "author_id": author_id,
        "content_type": content.kind,
        "language": content.language,
        "status": review.status,
        "version": review.version,
        "decision": None,
        "report_count": 0,
        "appeal": None,
        "provider_request_id": review.provider_request_id,
        "created_at": _DATETIME.to_representation(review.created_at),
        "updated_at": _DATETIME.to_representation(review.updated_at),
        "processing_started_at": _date_or_none(review.processing_started_at),
        "completed_at": _date_or_none(review.completed_at),
        "content_erased_at": _date_or_none(content.erased_at),
    }


def _date_or_none(value) -> str | None:
    return None if value is None else _DATETIME.to_representation(value)
