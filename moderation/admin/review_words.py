"""What the review page says of a review, in a moderator's words: no ids, UUIDs or cause codes
(docs/workplace.md, "Moderator words"). Those stay in the timeline, the page's raw record, and in
the admin's raw views.

Also the message an action leaves ("Rejected as harassment." with its Undo button) and the
erased content's account (when, why, by whom).
"""

from __future__ import annotations

from django.middleware.csrf import get_token
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from audit.models import ReviewTransition
from moderation.models import AccountAction, Cause, ContentReview, Decision, DecisionSource, ReviewStatus, RuleAction, SecondLook, Strike
from moderation.verdicts import match_bank
from moderation.words import STATUS_NOW, actor_words, cause_words, decided

SOURCE_WORDS = {DecisionSource.PROVIDER: "the model", DecisionSource.SYSTEM: "the system (the model failed)"}


# The rule action that yields each label: a rule of that action decided a provider decision.
_ACTION_FOR = {ReviewStatus.REJECTED: RuleAction.REJECT, ReviewStatus.MANUAL_REVIEW: RuleAction.MANUAL_REVIEW}


def deciding_match(decision: Decision | None) -> dict | None:
    """The rule or hash-bank match behind an automatic decision's label, when one decided it (its
    action is the label's): then the words say "rule ..." or "hash bank ...", never the model's
    top score, which may be 0.04 on a text a rule rejected."""
    if decision is None or decision.source == DecisionSource.MODERATOR:
        return None
    wanted = _ACTION_FOR.get(decision.label)
    return next((m for m in decision.rule_matches or [] if isinstance(m, dict) and m.get("action") == wanted), None)


def decided_by_text(match: dict) -> str:
    bank = match_bank(match)
    return f"hash bank {bank}" if bank else f"rule {match.get('rule', '')}"


def decision_words(decision: Decision | None) -> str:
    """The decision in force, in words: what, by whom, why ("Rejected as hate by mia: slur")."""
    if decision is None:
        return "None yet"
    if decision.source == DecisionSource.MODERATOR:
        by = f"moderator {decision.moderator}" if decision.moderator_id else "a moderator"
    elif (match := deciding_match(decision)) is not None:
        by = decided_by_text(match)
    else:
        by = SOURCE_WORDS.get(decision.source, "the system")
        if decision.callback_id:
            by += " (its callback)"
    score = f", top score {decision.score:.2f}" if decision.score is not None else ""
    why = f": {decision.reason}" if decision.reason else (f" ({decision.explanation})" if decision.explanation else "")
    return f"{decided(decision.label, decision.category)} by {by}{score}{why}"


def status_words(review: ContentReview, report_count: int = 0) -> str:
    """How the review came to its status ("Sent to a human by 3 user reports")."""
    latest = (ReviewTransition.objects.filter(review=review).order_by("-id")
              .values_list("cause", "actor").first())
    if latest is None:
        return STATUS_NOW[ReviewStatus.PENDING].capitalize()
    last, actor = latest
    match = deciding_match(review.decision) if last in (Cause.PROVIDER_RESULT, Cause.PROVIDER_CALLBACK) else None
    if last == Cause.USER_REPORTS and report_count:
        how = f"by {report_count} user report{'s' if report_count != 1 else ''}"
    elif match is not None:  # a rule or a hash bank decided it, not the model's scores
        how = f"by {decided_by_text(match)}"
    else:
        how = cause_words(last, actor_words(actor))  # unnamed: "a moderator", "an operator"
    status = review.status
    if status == ReviewStatus.PENDING:
        return STATUS_NOW[status].capitalize() + (f" ({how})" if last == Cause.REPROCESS else "")
    if status == ReviewStatus.PROCESSING:
        return STATUS_NOW[status].capitalize()
    return f"{decided(status)} {how}".strip()


def erasure_words(review: ContentReview) -> dict | None:
    """When, why and by whom the content was erased (None: it was not)."""
    erasure = getattr(review.content, "erasure", None) if review.content.erased_at else None
    if erasure is None:
        return None if not review.content.erased_at else {"at": review.content.erased_at, "by": "", "reason": ""}
    return {"at": erasure.erased_at, "by": actor_words(erasure.actor, erasure.actor_id), "reason": erasure.reason}


def ladder_words(decision: Decision) -> str:
    """What the decision did to its author, when it counted a strike: the strike's points, the
    author's active points, and what the enforcement ladder did ("suspended until ...") or will do
    next ("ban at 8"). "" for a decision that counted no strike. Three reads, on a decision only."""
    strike = Strike.objects.filter(decision=decision).select_related("author").first()
    if strike is None:
        return ""
    points = strike.author.strike_points
    words = (f"A strike of {strike.points} point{'s' if strike.points != 1 else ''}: the author has {points} "
             f"active point{'s' if points != 1 else ''}")
    action = AccountAction.objects.filter(strike=strike).first()
    if action is not None:
        done = {"warn": "warned", "suspend": "suspended", "ban": "banned"}.get(action.action, action.action)
        until = f" until {action.until:%Y-%m-%d %H:%M} UTC" if action.until else ""
        return f"{words}, and the enforcement ladder {done} them{until}."
    ladder = decision.policy.enforcement_ladder if decision.policy_id else []
    rungs = sorted((r for r in ladder if isinstance(r, dict) and r.get("points", 0) > points), key=lambda r: r["points"])
    return f"{words} (next: {rungs[0]['action']} at {rungs[0]['points']})." if rungs else f"{words}."


def done_message(request, action: str, review: ContentReview):
    """What an action left, named ("Rejected as harassment."), with what it did to the author
    (`ladder_words`) and an Undo button for a decision (a POST: the message carries the form,
    with this session's CSRF token)."""
    if action == "override":
        decision = review.decision
        what = decided(decision.label, decision.category) if decision else "Decided"
        ladder = ladder_words(decision) if decision else ""
        if decision and SecondLook.objects.filter(resolution=decision).exists():
            ladder = f"{ladder} The second look is closed with this decision, and the client is told of it.".strip()
        undo_url = reverse("admin:moderation_contentreview_act", args=[review.pk, "undo"])
        return format_html(
            '{}.{} <form method="post" action="{}" class="undo-form">'
            '<input type="hidden" name="csrfmiddlewaretoken" value="{}">'
            '<input type="hidden" name="decision" value="{}"><input type="hidden" name="version" value="{}">'
            '<button type="submit" class="undo-link">Undo</button></form>',
            what, f" {ladder}" if ladder else "", undo_url, get_token(request), decision.pk if decision else "",
            review.version,
        )
    if action == "escalate":
        if review.leased_to_id and review.lease_expires_at and review.lease_expires_at > timezone.now():
            return f"Escalated to a human: it is yours until {review.lease_expires_at:%H:%M} UTC."
        return "Escalated to a human: it waits in the escalations queue."
    if action == "second_look":
        return ("Sent for a second look: it waits in the escalations queue for a senior moderator. The decision "
                "stands meanwhile, and the client is told only if it changes.")
    if action == "confirm_second_look":
        return "Decision confirmed: the second look is closed. Nothing changed, and the client is not told."
    if action == "undo":
        until = f" (yours until {review.lease_expires_at:%H:%M} UTC)" if review.lease_expires_at else ""
        return f"Undone: the review waits for a decision again{until}."
    return "Sent to the model again."
