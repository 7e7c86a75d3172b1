"""The moderator's viewer (docs/workplace.md, "Images and audio"): a review's image or audio,
served from this platform's own copy (`ReviewMedia.data`) to staff holding
`moderation.view_media_bytes`, never from the client's `media_url` (a hotlink would tell a third
party who looked, and when, and could change under the moderator's eyes).

Images are shown blurred and grey until the moderator reveals them (their `MediaPreference` may
say otherwise); an image that matched a `never_display` bank is served to nobody.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import BooleanField, Exists, ExpressionWrapper, OuterRef, Q, Value
from django.http import Http404, HttpResponse, HttpResponseBadRequest, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html

from moderation import services
from moderation.media.images import MIME_TYPES
from moderation.models import ContentKind, ContentReview, Decision, MediaPreference, ReviewMedia
from moderation.selectors import visible_to
from moderation.verdicts import match_bank

VIEW_MEDIA = "moderation.view_media_bytes"
# What the browser does with the bytes: keeps no copy (a shared workstation's cache holds no
# image), never sniffs them into HTML or script, and, opened on their own in a tab, runs
# nothing (a sandboxed document with no sources at all).
MEDIA_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Content-Disposition": "inline",
    "Content-Security-Policy": "default-src 'none'; sandbox",
    "Referrer-Policy": "no-referrer",
}
IMAGE_TYPES = frozenset(MIME_TYPES.values())
THUMB = "thumb"


def _shown(**extra) -> Q:
    """Media with bytes that may be shown: not removed, not matched in a never_display bank."""
    return Q(data__isnull=False, never_display=False, **extra)


def with_thumbnail_flag(queryset, user):
    """Annotate `shows_thumbnail` on a review queryset: an image this user may see (one EXISTS in
    the list's own query, so a page of rows costs no query per row; the thumbnail itself is a
    request of its own, `media_view`)."""
    if not user.has_perm(VIEW_MEDIA):
        return queryset.annotate(shows_thumbnail=Value(False, output_field=BooleanField()))
    images = ReviewMedia.objects.filter(_shown(thumbnail__isnull=False), content=OuterRef("content_id"))
    return queryset.annotate(shows_thumbnail=Exists(images))


def media_url(review_id, *, size: str = "") -> str:
    url = reverse("admin:moderation_contentreview_media", args=[review_id])
    return f"{url}?size={size}" if size else url


def thumbnail_html(review: ContentReview) -> str:
    """A list row's thumbnail (blurred and grey by the stylesheet), for a review annotated by
    `with_thumbnail_flag`; "" for none."""
    if not getattr(review, "shows_thumbnail", False):
        return ""
    return format_html('<img class="media-thumb" src="{}" alt="image (blurred)" loading="lazy"> ',
                       media_url(review.pk, size=THUMB))


def media_view(model_admin, request, object_id) -> HttpResponse:
    """The review's stored bytes (`?size=thumb`: the small JPEG the job made when it decoded the
    image; nothing is decoded here). 403 without the permission; 404 for a review the user may not
    see, with no bytes (never fetched, removed), no thumbnail (not read yet, or not an image) or
    for a never_display image."""
    if not (model_admin.has_view_permission(request) and request.user.has_perm(VIEW_MEDIA)):
        raise PermissionDenied
    size = request.GET.get("size", "")
    if request.method not in ("GET", "HEAD") or size not in ("", THUMB):
        return HttpResponseBadRequest("GET this page, with no size or ?size=thumb.")
    # One query for the bytes, the review's visibility in it (each row of a list asks for its thumbnail).
    shown = visible_to(request.user, ReviewMedia.objects.filter(_shown(), content__review__pk=object_id),
                       through="content__review")
    if size == THUMB:
        thumbnail = shown.values_list("thumbnail", flat=True).first()
        if thumbnail is None:
            raise Http404("No thumbnail for this review (not read yet, or not an image).")
        data, mime = bytes(thumbnail), "image/jpeg"
    else:
        row = shown.defer("thumbnail").first()
        if row is None:
            raise Http404("No media to show for this review.")
        data, mime = bytes(row.data), row.mime
        if mime not in IMAGE_TYPES and not mime.startswith("audio/"):
            mime = "application/octet-stream"  # never a type a browser would run
    response = HttpResponse(data, content_type=mime)
    for header, value in MEDIA_HEADERS.items():
        response[header] = value
    return response


def preference_view(model_admin, request, object_id) -> HttpResponse:
    """Save the logged-in moderator's own defaults (reveal, colour), then back to the review."""
    if request.method != "POST" or not request.user.has_perm(VIEW_MEDIA):
        raise PermissionDenied
    services.media_preference_set(user=request.user, reveal=request.POST.get("reveal") == "on",
                                  colour=request.POST.get("colour") == "on")
    model_admin.message_user(request, "Your default for images is saved.", messages.SUCCESS)
    return HttpResponseRedirect(reverse("admin:moderation_contentreview_timeline", args=[object_id]))


@dataclass(frozen=True)
class MediaPanel:
    """What the review page shows of a review's media (templates/.../_media.html)."""

    kind: str
    # shown | never_display | forbidden | removed | missing (not fetched yet, or unreadable)
    state: str
    url: str = ""
    reveal: bool = False
    colour: bool = False
    row: ReviewMedia | None = None
    banks: list[dict] = field(default_factory=list)


def media_panel(request, review: ContentReview) -> MediaPanel | None:
    """The review page's media panel; None for content with no image or audio."""
    content = review.content
    if content.kind not in (ContentKind.IMAGE, ContentKind.AUDIO):
        return None
    # The page needs whether there are bytes, not the bytes (up to MEDIA_MAX_BYTES).
    row = (ReviewMedia.objects.filter(pk=content.pk).defer("data", "thumbnail")
           .annotate(has_data=ExpressionWrapper(Q(data__isnull=False), output_field=BooleanField())).first())
    banks = [{**m, "bank": match_bank(m)} for m in _stored_matches(review) if match_bank(m)]
    if row is not None and row.never_display:
        state = "never_display"
    elif not request.user.has_perm(VIEW_MEDIA):
        state = "forbidden"
    elif row is None or not row.has_data:
        state = "removed" if row is not None and row.removed_at else "missing"
    else:
        state = "shown"
    preference = MediaPreference.objects.filter(user=request.user).first() or MediaPreference()
    return MediaPanel(kind=content.kind, state=state, url=media_url(review.pk) if state == "shown" else "",
                      reveal=preference.reveal, colour=preference.colour, row=row, banks=banks)


def _stored_matches(review: ContentReview) -> list[dict]:
    """The matches of the review's decision, or (a moderator decided last: theirs has none) of
    the newest decision that had any."""
    if review.decision is not None and review.decision.rule_matches:
        return review.decision.rule_matches
    return (Decision.objects.filter(review=review).exclude(rule_matches=[]).order_by("-id")
            .values_list("rule_matches", flat=True).first()) or []
