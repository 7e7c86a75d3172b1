from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, PolymorphicProxySerializer, extend_schema
from rest_framework import generics, status
from django.db.models import Count, OuterRef, Prefetch, Subquery
from django.db.models.functions import Coalesce
from django.shortcuts import get_object_or_404
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response

from moderation import services
from moderation.observability.timeline import review_timeline
from moderation.api import fast
from moderation.api.authentication import BearerTokenAuthentication
from moderation.api.pagination import NewestFirstPagination
from moderation.api.schema import (
    INVALID,
    IMAGE_SUBMISSION,
    MEDIA_SUBMISSION,
    METADATA_SUBMISSION,
    NOT_FOUND,
    REPLAY_HEADER,
    RESPONSE_HEADERS,
    TEXT_SUBMISSION,
    THROTTLED,
    TOO_LARGE,
    UNAUTHORIZED,
    error,
)
from moderation.services.idempotency import fingerprint
from moderation.api.serializers import (
    AppealCreateSerializer,
    AppealSerializer,
    ReportCreateSerializer,
    ReportSerializer,
    ReviewListQuerySerializer,
    ReviewSerializer,
    ReviewSubmitSerializer,
    TimelineEntrySerializer,
)
from moderation.models import Appeal, ApiClient, ContentReview, Report


class ClientReviewsMixin:
    """A client sees only its own reviews: anyone else's is a 404, not a 403."""

    serializer_class = ReviewSerializer

    def get_queryset(self):
        return (
            ContentReview.objects.filter(client=self.request.user)
            .select_related("content", "decision__policy", "author")
            .annotate(report_count=Coalesce(Subquery(
                Report.objects.filter(review=OuterRef("pk")).order_by().values("review").annotate(n=Count("*")).values("n")
            ), 0))
            .prefetch_related(Prefetch("appeals", Appeal.objects.order_by("-created_at"), to_attr="latest_appeals"))
        )


class ReviewListCreateView(ClientReviewsMixin, generics.GenericAPIView):
    pagination_class = NewestFirstPagination

    @extend_schema(
        summary="List your reviews, newest first",
        parameters=[ReviewListQuerySerializer, *RESPONSE_HEADERS],
        responses={200: ReviewSerializer(many=True), 400: INVALID, 401: UNAUTHORIZED, 413: TOO_LARGE, 429: THROTTLED},
    )
    def get(self, request):
        if request.query_params.get("status", None) == "":
            raise ValidationError({"status": ["Give a status, or leave the parameter out."]})
        query = ReviewListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        reviews = self.get_queryset()
        if "status" in query.validated_data:
            reviews = reviews.filter(status=query.validated_data["status"])
        page = self.paginate_queryset(reviews)
        return self.get_paginated_response(ReviewSerializer(page, many=True).data)

    @extend_schema(
        summary="Submit content for moderation",
        description=(
            "201 with a new pending review; 200 with the existing review when this client already "
            "submitted this `external_id` (never a second review)."
        ),
        parameters=[*RESPONSE_HEADERS, REPLAY_HEADER, OpenApiParameter(
            "Idempotency-Key", str, OpenApiParameter.HEADER, required=False,
            description="Retries with the same key and body get the first response again (header "
                        "`Idempotent-Replayed: true`); the same key with another body is a 422. Kept 24 h.",
        )],
        request=PolymorphicProxySerializer(
            component_name="ReviewSubmission",
            serializers={"text": TEXT_SUBMISSION, "image": IMAGE_SUBMISSION, "audio": MEDIA_SUBMISSION,
                         "metadata": METADATA_SUBMISSION},
            resource_type_field_name="content_type",
        ),
        responses={201: ReviewSerializer, 200: ReviewSerializer, 400: INVALID, 401: UNAUTHORIZED, 413: TOO_LARGE,
                   422: error("The Idempotency-Key was used with a different body."), 429: THROTTLED},
    )
    def post(self, request):
        key = request.headers.get("Idempotency-Key")
        if key is None:
            status_code, body = self._submit(request)
            return Response(body, status=status_code)
        if not 1 <= len(key) <= 255 or not key.isprintable():
            raise ValidationError({"Idempotency-Key": ["Use 1 to 255 printable characters."]})
        status_code, body, replayed = services.idempotent_call(
            client=request.user, key=key, body_fingerprint=fingerprint(request.data),
            compute=lambda: self._submit(request),
        )
        response = Response(body, status=status_code)
        if replayed:
            response["Idempotent-Replayed"] = "true"
        return response

    def _submit(self, request) -> tuple[int, dict]:
        data = fast.text_submission(request)  # a plain text submission, checked by a compiled schema
        if data is None:
            submission = ReviewSubmitSerializer(data=request.data)
            submission.is_valid(raise_exception=True)
            data = submission.validated_data
        review, created = services.review_submit(
            client=request.user,
            external_id=data["external_id"],
            kind=data["content_type"],
            text=data.get("text", ""),
            media_url=data.get("media_url", ""),
            image=data.get("image_base64"),
            metadata=data.get("metadata"),
            author_id=data.get("author_id"),
        )
        if created:  # nothing to count or look up yet: its author is the one just named
            return status.HTTP_201_CREATED, fast.created_review_body(review, author_id=data.get("author_id"))
        return status.HTTP_200_OK, ReviewSerializer(review).data


@extend_schema(
    summary="A review's status and decision",
    parameters=RESPONSE_HEADERS,
    responses={200: ReviewSerializer, 401: UNAUTHORIZED, 404: NOT_FOUND, 413: TOO_LARGE, 429: THROTTLED},
)
class ReviewDetailView(ClientReviewsMixin, generics.RetrieveAPIView):
    pass


class ReviewTimelineView(generics.GenericAPIView):
    """The review's causal timeline: for the client that owns it, or for staff (session login)."""

    authentication_classes = [BearerTokenAuthentication, SessionAuthentication]
    serializer_class = TimelineEntrySerializer
    pagination_class = None

    @extend_schema(
        summary="A review's causal timeline",
        parameters=RESPONSE_HEADERS,
        responses={200: TimelineEntrySerializer(many=True), 401: UNAUTHORIZED, 404: NOT_FOUND, 429: THROTTLED},
    )
    def get(self, request, pk):
        reviews = ContentReview.objects.select_related("content", "client")
        if isinstance(request.user, ApiClient):
            reviews = reviews.filter(client=request.user)
        elif not (request.user.is_staff and request.user.has_perm("moderation.view_contentreview")):
            raise NotFound()
        review = get_object_or_404(reviews, pk=pk)
        client = isinstance(request.user, ApiClient)
        return Response([entry.as_client_json() if client else entry.as_json() for entry in review_timeline(review)])


@extend_schema(
    summary="Report a review on behalf of one of your users",
    description=(
        "201 with the new report; 200 with the same report when that reporter already reported the "
        "review (one report per reporter per review). When an `approved` review reaches the active "
        "policy's `report_threshold` distinct reporters it goes to human review, once. A `dsa_notice` or "
        "`trusted_flagger` sends an `approved` review to human review at once, and one still `pending` or "
        "`processing` when its result lands (never approved automatically)."
    ),
    request=ReportCreateSerializer,
    parameters=RESPONSE_HEADERS,
    responses={201: ReportSerializer, 200: ReportSerializer, 400: INVALID, 401: UNAUTHORIZED, 404: NOT_FOUND,
               413: TOO_LARGE, 429: THROTTLED},
)
class ReviewReportsView(generics.GenericAPIView):
    serializer_class = ReportSerializer

    def post(self, request, pk):
        review = get_object_or_404(ContentReview.objects.filter(client=request.user).only("pk"), pk=pk)
        body = ReportCreateSerializer(data=request.data, context={"policy": services.policy_active()})
        body.is_valid(raise_exception=True)
        filed = services.report_file(review_id=review.pk, **body.validated_data)
        return Response(ReportSerializer(filed).data, status=status.HTTP_201_CREATED if filed.created else status.HTTP_200_OK)


@extend_schema(
    summary="Appeal a rejection on behalf of one of your users",
    description=(
        "201 with the open appeal, and the review goes back to a human. At most one appeal per "
        "decision (409 `appeal_exists`); only a `rejected` review can be appealed (409 `not_appealable`), "
        "until the decision's `appealable_until` (409 `appeal_window_closed`)."
    ),
    request=AppealCreateSerializer,
    parameters=RESPONSE_HEADERS,
    responses={201: AppealSerializer, 400: INVALID, 401: UNAUTHORIZED, 404: NOT_FOUND,
               409: error("The decision was already appealed (`appeal_exists`), the review is not rejected "
                          "(`not_appealable`), or its appeal window has closed (`appeal_window_closed`)."),
               413: TOO_LARGE, 429: THROTTLED},
)
class ReviewAppealsView(generics.GenericAPIView):
    serializer_class = AppealSerializer

    def post(self, request, pk):
        review = get_object_or_404(ContentReview.objects.filter(client=request.user).only("pk"), pk=pk)
        body = AppealCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        appeal = services.appeal_file(review_id=review.pk, **body.validated_data)
        return Response(AppealSerializer(appeal).data, status=status.HTTP_201_CREATED)
