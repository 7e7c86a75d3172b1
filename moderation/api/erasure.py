"""`DELETE /api/v1/reviews/{id}/content`: a client erases the content of one of its reviews
(moderation/privacy/erasure.py; docs/design.md, invariant 16)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from audit.models import Actor
from moderation.api.schema import INVALID, NOT_FOUND, RESPONSE_HEADERS, THROTTLED, TOO_LARGE, UNAUTHORIZED
from moderation.api.serializers import StrictCharField
from moderation.privacy.erasure import REASON_MAX_CHARS, content_erase
from moderation.models import ContentReview, ReviewStatus

DEFAULT_REASON = "erasure requested by the client through the API"


class ErasureQuerySerializer(serializers.Serializer):
    # A query parameter, not a body: many HTTP clients cannot send a body with DELETE.
    reason = StrictCharField(
        required=False, max_length=REASON_MAX_CHARS,
        help_text="Why (kept on the tombstone, without any quote of what is erased). Default: the client asked.",
    )


class ErasureSerializer(serializers.Serializer):
    review_id = serializers.UUIDField()
    content_id = serializers.UUIDField()
    erased_at = serializers.DateTimeField(allow_null=True, help_text="Null while the erasure is deferred.")
    reason = serializers.CharField()
    stopped_moderation = serializers.BooleanField(
        help_text="The review was still being moderated: it ended in manual_review, and no provider saw the content again."
    )
    status = serializers.ChoiceField(choices=ReviewStatus.choices, help_text="The review's status after the erasure.")
    deferred = serializers.BooleanField(
        help_text="A legal hold keeps the content: nothing was erased yet; the erasure is recorded and runs when "
                  "the hold ends."
    )


class ReviewContentView(generics.GenericAPIView):
    serializer_class = ErasureSerializer

    @extend_schema(
        operation_id="reviews_content_erase",
        summary="Erase the content of one of your reviews",
        description=(
            "Redacts the text, media URL and metadata everywhere the platform stored them (raw provider "
            "callbacks and history included), replaces every reason, note and explanation written about the "
            "review (the decisions' explanations this API shows included) by `[erased]`, and keeps the review, "
            "its decisions (categories, canned reason codes, policy version), transitions and ids with "
            "a tombstone: who erased it, when and why. A review still being moderated is stopped (it ends in "
            "`manual_review`, and the content is never sent to a provider again). Erasing again answers the "
            "first erasure."
        ),
        request=None,
        parameters=[ErasureQuerySerializer, *RESPONSE_HEADERS],
        responses={200: ErasureSerializer, 400: INVALID, 401: UNAUTHORIZED, 404: NOT_FOUND, 413: TOO_LARGE,
                   429: THROTTLED},
    )
    def delete(self, request, pk):
        if not ContentReview.objects.filter(pk=pk, client=request.user).exists():
            raise NotFound()
        query = ErasureQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        report = content_erase(
            review_id=pk, actor=Actor.API, actor_id=request.user.name,
            reason=query.validated_data.get("reason", "").strip() or DEFAULT_REASON,
        )
        status = ContentReview.objects.values_list("status", flat=True).get(pk=pk)
        return Response(ErasureSerializer({**vars(report), "status": status, "deferred": report.deferred}).data)


@extend_schema(exclude=True)
class ReviewContentSlashView(ReviewContentView):
    """The same with a trailing slash, like the API's other paths."""
