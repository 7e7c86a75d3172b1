"""Authors through the API (docs/design.md, "Authors, strikes and account actions"): an author's
standing, strikes and actions; an appeal of the suspension or ban in force; erasure of every
content of an author.

An author is (client, author_id): a client reaches only the authors it sent, and another client's
author of the same id is a 404, never a 403.

The author's id is a path segment that may itself hold slashes ("team/ann"), so the three paths
overlap: `authors/team/ann/appeals/` is where `team/ann` appeals, and also the page of the author
`team/ann/appeals`. Each path has exactly one method of its own, so the method decides: a GET of a
path ending in `/appeals/` or `/content/` reads the page of the author whose id ends so
(`SuffixIsPartOfTheId`). Percent-encoding a slash changes nothing: servers decode `%2F` before
routing.
"""

from __future__ import annotations

import time

from django.utils import timezone
from django.db.models import Count, Q, Sum, Window
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import generics, serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from audit.models import Actor
from moderation import services
from moderation.api.erasure import DEFAULT_REASON, ErasureQuerySerializer
from moderation.api.schema import INVALID, RESPONSE_HEADERS, THROTTLED, TOO_LARGE, UNAUTHORIZED, error
from moderation.api.serializers import NoticeSerializer, StrictCharField
from moderation.privacy.erasure import AUTHOR_ERASE_PER_CALL, AUTHOR_ERASE_SECONDS, author_content_erase
from moderation.models import (
    APPEAL_STATEMENT_MAX,
    RESTRICTIVE_ACTIONS,
    AccountAction,
    AccountAppealStatus,
    ActionCause,
    ActionKind,
    Author,
    ContentReview,
    ReviewStatus,
    Standing,
    Strike,
)
from moderation.transparency.reasons import account_statement

# The page lists the newest this many active strikes and actions: an author rejected a hundred
# thousand times still answers in one small page. `strike_points` and the counts cover them all.
LIST_MAX = 100

AUTHOR_PATH = OpenApiParameter(
    "author_id", str, OpenApiParameter.PATH,
    description="The author's id as you sent it, percent-encoded (a `/` may stay as it is).",
)
AUTHOR_NOT_FOUND = error("This client never sent this author_id.")


def client_author(client, author_id: str, *queryset_args) -> Author:
    return get_object_or_404(Author.objects.select_related(*queryset_args), client=client, author_id=author_id)


# --- the author page --------------------------------------------------------------------------

class StrikeSerializer(serializers.Serializer):
    review_id = serializers.UUIDField()
    category = serializers.CharField(help_text="The rejection's top category.")
    points = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(help_text="When it stops counting (the policy's strike window).")


class RestrictionSerializer(serializers.Serializer):
    action_id = serializers.UUIDField(source="pk")
    action = serializers.ChoiceField(choices=RESTRICTIVE_ACTIONS)
    until = serializers.DateTimeField(allow_null=True, help_text="When a suspension ends (null: a ban).")
    reason = serializers.CharField()


class AccountAppealSummarySerializer(serializers.Serializer):
    id = serializers.UUIDField()
    status = serializers.ChoiceField(choices=AccountAppealStatus.choices)
    created_at = serializers.DateTimeField()
    resolved_at = serializers.DateTimeField(allow_null=True)


class StrikeFactSerializer(serializers.Serializer):
    category = serializers.CharField()
    points = serializers.IntegerField()


class AccountStatementSerializer(serializers.Serializer):
    """An action's statement of reasons (moderation.transparency.reasons.account_statement): it names no
    moderator."""

    action = serializers.ChoiceField(choices=ActionKind.choices)
    standing = serializers.ChoiceField(choices=Standing.choices, help_text="The standing the action led to.")
    until = serializers.DateTimeField(allow_null=True)
    reasons = StrikeFactSerializer(many=True, help_text="The active strikes the action rested on.")
    strike_points = serializers.IntegerField()
    automated = serializers.BooleanField(help_text="True when the enforcement ladder took it.")
    policy_version = serializers.IntegerField(allow_null=True)
    explanation = serializers.CharField()
    appealable_until = serializers.DateTimeField(
        help_text="The end of the appeal window (a suspension or ban in force may be appealed until then)."
    )
    notice = NoticeSerializer(help_text="What to tell the affected user.")


class AccountActionSerializer(serializers.Serializer):
    action_id = serializers.UUIDField(source="pk")
    action = serializers.ChoiceField(choices=ActionKind.choices)
    until = serializers.DateTimeField(allow_null=True)
    cause = serializers.ChoiceField(choices=ActionCause.choices)
    created_at = serializers.DateTimeField()
    appeal = serializers.SerializerMethodField()
    statement = serializers.SerializerMethodField()

    @extend_schema_field(AccountAppealSummarySerializer(allow_null=True))
    def get_appeal(self, action: AccountAction) -> dict | None:
        appeal = getattr(action, "appeal", None)  # select_related by the view
        return AccountAppealSummarySerializer(appeal).data if appeal is not None else None

    @extend_schema_field(AccountStatementSerializer)
    def get_statement(self, action: AccountAction) -> dict:
        return account_statement(action)


class AuthorSerializer(serializers.Serializer):
    author_id = serializers.CharField()
    standing = serializers.ChoiceField(choices=Standing.choices)
    strike_points = serializers.IntegerField(help_text="The points of all the author's active strikes.")
    strikes = StrikeSerializer(many=True, help_text=f"The active strikes, newest first (at most {LIST_MAX}).")
    restriction = RestrictionSerializer(allow_null=True, help_text="The suspension or ban in force, if any.")
    actions = AccountActionSerializer(many=True, help_text=f"Actions taken on the author, newest first (at most {LIST_MAX}).")
    review_count = serializers.IntegerField(help_text="The author's reviews.")
    rejected_count = serializers.IntegerField(help_text="The author's reviews now rejected.")


class AuthorDetailView(generics.GenericAPIView):
    serializer_class = AuthorSerializer

    @extend_schema(
        summary="An author's standing, strikes and account actions",
        description=(
            f"`strikes` and `actions` list the newest {LIST_MAX}; `strike_points`, `review_count` and "
            "`rejected_count` count everything. 404 for an author this client never sent (another "
            "client's author of the same id is another author)."
        ),
        parameters=[AUTHOR_PATH, *RESPONSE_HEADERS],
        responses={200: AuthorSerializer, 401: UNAUTHORIZED, 404: AUTHOR_NOT_FOUND, 413: TOO_LARGE, 429: THROTTLED},
    )
    def get(self, request, author_id):
        author = client_author(request.user, author_id, "restriction")
        counts = ContentReview.objects.filter(author=author).aggregate(  # review_author_idx
            review_count=Count("pk"), rejected_count=Count("pk", filter=Q(status=ReviewStatus.REJECTED)),
        )
        # The strikes younger than their window, whether or not the lapse job has run yet
        # (strike_author_active_idx); their sum is the author's points.
        # Their total rides on each row (a window over all of them, before the list is cut).
        strikes = list(Strike.objects.filter(author=author, ended_at__isnull=True, expires_at__gt=timezone.now())
                       .annotate(total=Window(Sum("points"))).order_by("-created_at", "-id")[:LIST_MAX])
        page = {
            "author_id": author.author_id, "standing": author.standing,
            "strike_points": strikes[0].total if strikes else 0,
            "strikes": strikes,
            "restriction": author.restriction,
            "actions": AccountAction.objects.filter(author=author).select_related("policy", "appeal", "author")
            .order_by("-created_at", "-id")[:LIST_MAX],
            **counts,
        }
        return Response(AuthorSerializer(page).data)


class SuffixIsPartOfTheId:
    """A GET of a path that ends in this view's suffix reads the page of the author whose id ends
    so (see the module docstring); the schema leaves it out, being AuthorDetailView's."""

    suffix = ""

    @extend_schema(exclude=True)
    def get(self, request, author_id):
        return AuthorDetailView().get(request, f"{author_id}{self.suffix}")


# --- an appeal of the restriction in force ----------------------------------------------------

class AccountAppealCreateSerializer(serializers.Serializer):
    statement = StrictCharField(max_length=APPEAL_STATEMENT_MAX, trim_whitespace=False,
                                help_text="Why the suspension or ban is wrong, in the author's words.")


class AccountAppealSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    action_id = serializers.UUIDField()
    status = serializers.ChoiceField(choices=AccountAppealStatus.choices)
    created_at = serializers.DateTimeField()


@extend_schema(
    summary="Appeal an author's suspension or ban on their behalf",
    description=(
        "201 with the open appeal of the suspension or ban in force; a moderator other than the one "
        "who imposed it resolves it (`account_appeal.resolved` tells you how). At most one appeal per "
        "action (409 `appeal_exists`); 409 `not_appealable` when no suspension or ban is in force; 409 "
        "`appeal_window_closed` after the action's `appealable_until`."
    ),
    request=AccountAppealCreateSerializer,
    parameters=[AUTHOR_PATH, *RESPONSE_HEADERS],
    responses={201: AccountAppealSerializer, 400: INVALID, 401: UNAUTHORIZED, 404: AUTHOR_NOT_FOUND,
               409: error("The action was already appealed (`appeal_exists`), no suspension or ban is in "
                          "force (`not_appealable`), or its appeal window has closed (`appeal_window_closed`)."),
               413: TOO_LARGE, 429: THROTTLED},
)
class AuthorAppealsView(SuffixIsPartOfTheId, generics.GenericAPIView):
    serializer_class = AccountAppealSerializer
    suffix = "/appeals"

    def post(self, request, author_id):
        body = AccountAppealCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            appeal = services.account_appeal_file(client=request.user, author_id=author_id, **body.validated_data)
        except Author.DoesNotExist:
            raise NotFound() from None
        return Response(AccountAppealSerializer(appeal).data, status=status.HTTP_201_CREATED)


# --- erasure of every content of an author ----------------------------------------------------

class AuthorErasureSerializer(serializers.Serializer):
    author_id = serializers.CharField()
    erased = serializers.IntegerField(help_text="Contents this call erased.")
    stopped_moderation = serializers.IntegerField(
        help_text="Of those, reviews still being moderated: they ended in manual_review."
    )
    already_erased = serializers.IntegerField(help_text="Contents erased before this call (left as they were).")
    remaining = serializers.IntegerField(
        help_text=f"Contents still to erase (a call erases at most {AUTHOR_ERASE_PER_CALL}, and starts none after "
                  f"{AUTHOR_ERASE_SECONDS:g} s): call again until 0."
    )
    held = serializers.IntegerField(
        help_text="Contents a legal hold keeps: their erasure is recorded and runs when the hold ends (not in remaining)."
    )
    reason = serializers.CharField()


class AuthorContentView(generics.GenericAPIView):
    serializer_class = AuthorErasureSerializer

    @extend_schema(
        operation_id="authors_content_erase",
        summary="Erase every content of one of your authors",
        description=(
            "Erases each of the author's contents exactly as `DELETE /api/v1/reviews/{id}/content` does, one "
            f"review at a time, at most {AUTHOR_ERASE_PER_CALL} (or {AUTHOR_ERASE_SECONDS:g} s of work) a call: "
            "repeat while `remaining` is above 0 "
            "(a repeat never erases anything twice). The author's strikes and account actions stay, as "
            "facts (category, points, the action and its statement); the words written about them (the "
            "actions' reasons, account appeals' statements and resolutions, and their notifications' reasons "
            "and explanations) are replaced by `[erased]` at every call. Content submitted after the call is "
            "not erased."
        ),
        request=None,
        parameters=[AUTHOR_PATH, ErasureQuerySerializer, *RESPONSE_HEADERS],
        responses={200: AuthorErasureSerializer, 400: INVALID, 401: UNAUTHORIZED, 404: AUTHOR_NOT_FOUND,
                   413: TOO_LARGE, 429: THROTTLED},
    )
    def delete(self, request, author_id):
        author = client_author(request.user, author_id)
        query = ErasureQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        deadline = time.monotonic() + AUTHOR_ERASE_SECONDS
        report = author_content_erase(
            author_pk=author.pk, actor=Actor.API, actor_id=request.user.name, limit=AUTHOR_ERASE_PER_CALL,
            reason=query.validated_data.get("reason", "").strip() or DEFAULT_REASON,
            stop=lambda: time.monotonic() > deadline,
        )
        return Response(AuthorErasureSerializer({**vars(report), "author_id": author.author_id}).data)


@extend_schema(exclude=True)
class AuthorContentSlashView(SuffixIsPartOfTheId, AuthorContentView):
    """The same with a trailing slash, like the API's other paths (a GET: the author `.../content`)."""

    suffix = "/content"

