"""Deadlines in the workplace (docs/workplace.md, "Deadlines"): a waiting review's due time in
words, and the deadline page: per queue, the reviews waiting, near their deadline and past it,
and per queue and week the median and 95th percentile time to decision and the breaches.

The page is for those who read everyone's figures (`moderation.view_all_qa`: team leads,
supervisors, auditors); a queue the viewer may not open shows none of its figures."""

from __future__ import annotations

from datetime import UTC, datetime

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.utils.html import format_html
from django.utils.timesince import timesince, timeuntil

from moderation import services
from moderation.models import ContentReview, ModerationPolicy
from moderation.observability.deadlines import WEEKS_MAX, open_figures, week_zone, weekly_figures
from moderation.review_queues import DeadlineState, deadline_for, deadline_state
from moderation.selectors import queues_forbidden

DEFAULT_NEAR_SHARE = ModerationPolicy._meta.get_field("deadline_near_share").default
FIGURES_PERMISSION = "moderation.view_all_qa"
WEEKS_SHOWN = 8

# What each state says, in words first (a colour alone tells nothing to many readers).
_WORDS = {
    DeadlineState.ON_TIME: ("due", "deadline-on-time"),
    DeadlineState.NEAR: ("Near its deadline: due", "deadline-near"),
    DeadlineState.BREACHED: ("Past its deadline: was due", "deadline-breached"),
}


def due_html(review: ContentReview, *, now: datetime, near_share: float) -> str:
    """A waiting review's due time as a moderator reads it: "due 14:05 UTC, 7 Dec (in 3 hours)",
    "Near its deadline: due ...", or "Past its deadline: was due ... (2 hours ago)"; empty
    without a due time."""
    if review.due_at is None:
        return ""
    state = deadline_state(queued_at=review.queued_at, due_at=review.due_at, now=now, near_share=near_share)
    words, css = _WORDS[state]
    when = (f"{timesince(review.due_at, now)} ago" if state == DeadlineState.BREACHED
            else f"in {timeuntil(review.due_at, now)}")
    due = review.due_at.astimezone(UTC)
    return format_html('<span class="badge deadline {}" id="due-{}" data-state="{}">{} {} UTC, {} ({})</span>',
                       css, review.short_id, state, words, f"{due:%H:%M}", f"{due.day} {due:%b}", when)


def deadlines_view(model_admin, request):
    """The deadline page: /admin/moderation/contentreview/deadlines/ (?weeks=N&tz=Europe/Berlin)."""
    if not request.user.has_perm(FIGURES_PERMISSION):
        raise PermissionDenied
    weeks, zone_name = request.GET.get("weeks", str(WEEKS_SHOWN)), request.GET.get("tz", "")
    try:
        if not weeks.isascii() or not weeks.isdigit() or not 1 <= int(weeks) <= WEEKS_MAX:
            raise ValueError(f"weeks is a whole number from 1 to {WEEKS_MAX}")
        zone = week_zone(zone_name)
        weeks_n = int(weeks)
    except ValueError as exc:
        model_admin.message_user(request, f"Not shown as asked: {exc}. Shown: {WEEKS_SHOWN} weeks in UTC.",
                                 messages.ERROR)
        zone, weeks_n = week_zone("UTC"), WEEKS_SHOWN
    policy = services.policy_active()
    queues = services.review_queues(request.user)  # only those this viewer may open
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Deadlines",
        "opts": model_admin.model._meta,
        "zone": zone.key,
        "weeks": weeks_n,
        "targets": [(q, deadline_for(policy, q.slug).total_seconds()) for q in queues],
        "near_percent": round(policy.deadline_near_share * 100),
        "open": open_figures(policy, queues=queues),
        "weekly": weekly_figures(weeks=weeks_n, zone=zone, queues=queues,
                                 hidden_queues=queues_forbidden(request.user)),
        "policy": policy,
    }
    return TemplateResponse(request, "admin/moderation/contentreview/deadlines.html", context)
