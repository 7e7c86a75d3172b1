"""Second looks at decided reviews in the workplace (docs/workplace.md, "A second look at a decided
review"): the panel of the review page (ask for one; or, for a senior moderator, confirm the
decision or change it with the decide panel), and the list of open second looks the escalations
queue shows. Only reviews the moderator may see are listed or counted (moderation/selectors.py).
"""

from __future__ import annotations

from django.utils import timezone
from django.utils.timesince import timesince

from moderation.admin.review_forms import ReasonForm
from moderation.admin.review_words import decision_words
from moderation.errors import ModerationError
from moderation.models import ContentReview, ReviewQueue, ReviewStatus, SecondLook, SecondLookStatus
from moderation.selectors import visible_to
from moderation.services.second_looks import SETTLE_PERMISSION, second_look_check_settler

SECOND_LOOK_ROWS = 50
# Where open second looks are listed: they are sent "to the escalations queue", though their
# reviews keep their decision (and their status) until a senior moderator settles them.
SECOND_LOOK_QUEUE = ReviewQueue.ESCALATIONS


def second_look_panel(request, review: ContentReview, *, can_escalate: bool, erased: bool) -> dict:
    """What the review page shows of second looks: the open one (or the last settled one), the
    form to ask for one, the senior's confirm form, and whether the decide panel is held back
    (a second look is open and this moderator may not settle it: their decision would be refused)."""
    looks = SecondLook.objects.filter(review=review).select_related("requested_by", "resolved_by", "decision__moderator")
    look = looks.filter(status=SecondLookStatus.OPEN).first() or looks.order_by("-created_at", "-id").first()
    decided = review.status in (ReviewStatus.APPROVED, ReviewStatus.REJECTED)
    panel = {"second_look": look, "second_look_form": None, "confirm_form": None, "settle_refusal": "",
             "hold_decide": False}
    if look is not None and look.is_open:
        try:
            second_look_check_settler(look, request.user)
        except ModerationError as exc:
            panel["settle_refusal"] = exc.reason
            panel["hold_decide"] = True
        else:
            panel["confirm_form"] = ReasonForm(auto_id="id_confirm_%s")
    elif can_escalate and decided and not erased:
        panel["second_look_form"] = ReasonForm(initial={"version": review.version}, auto_id="id_second_look_%s")
    panel["is_senior"] = request.user.has_perm(SETTLE_PERMISSION)
    return panel


def second_looks_waiting(user) -> tuple[int, list[dict]]:
    """The open second looks `user` may see, oldest first: how many, and the first rows."""
    open_looks = visible_to(user, SecondLook.objects.filter(status=SecondLookStatus.OPEN), through="review")
    rows = list(open_looks.select_related("review__content", "review__client", "decision__moderator", "requested_by")
                .defer("review__content__text", "review__content__metadata")
                .order_by("created_at", "id")[:SECOND_LOOK_ROWS])
    now = timezone.now()
    return open_looks.count(), [{"look": look, "waited": timesince(look.created_at, now),
                                 "decision": decision_words(look.decision)} for look in rows]
