"""What the review page and the list show of a review's content, its model scores and its reports.

Content is shown, never fetched from its source: a media_url is text (with its host), and an
image or audio is played from the platform's own copy (moderation/admin/review_media.py), so
opening a review loads nothing from a third party (a tracking pixel would learn the
moderator's address).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.db.models import OuterRef, Subquery
from django.template.response import TemplateResponse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from moderation.admin import csp
from moderation.admin.review_words import deciding_match
from moderation.models import ContentReview, Decision, DecisionSource, ModerationPolicy, PileOn, ReportKind, ReviewStatus
from moderation.observability.workplace import ReportSummary
from moderation.verdicts import match_bank, thresholds_for


def workplace_page(model_admin, request, template: str, title: str, **context) -> TemplateResponse:
    """A page of the workplace (a review page, the queues, an author page) under the admin's
    Content-Security-Policy, with this response's nonce for its inline scripts (moderation/admin/csp.py)."""
    nonce = secrets.token_urlsafe(16)
    response = TemplateResponse(request, template, {
        **model_admin.admin_site.each_context(request), "opts": model_admin.model._meta, "title": title,
        "csp_nonce": nonce, **context,
    })
    response[csp.HEADER] = csp.policy(nonce)
    return response


def typed_back(posted) -> dict[str, str]:
    """What a refused decision posted, to show back when the review can no longer be decided
    (it went back to the provider meanwhile): the moderator's words are not lost."""
    return {"label": posted.get("label", ""), "category": posted.get("category", ""),
            "codes": ", ".join(value.split(":", 1)[-1] for value in posted.getlist("reason_codes")),
            "reason": posted.get("reason", ""), "note": posted.get("note", "")}


def media_host(url: str) -> str:
    return (urlsplit(url).hostname or "") if url else ""


def metadata_rows(metadata) -> list[tuple[str, str, bool]]:
    """(key, value, is_block) for each top-level metadata entry; nested values as indented JSON."""
    if not isinstance(metadata, dict):
        return [("value", json.dumps(metadata, indent=2, ensure_ascii=False), True)] if metadata else []
    rows = []
    for key, value in metadata.items():
        nested = isinstance(value, dict | list)
        rows.append((str(key), json.dumps(value, indent=2, ensure_ascii=False) if nested else str(value), nested))
    return rows


def top_category(decision: Decision | None) -> tuple[str, float] | None:
    scores = (decision.category_scores if decision else None) or {}
    if not scores:
        return None
    category = max(sorted(scores), key=lambda c: float(scores[c]))
    return category, float(scores[category])


def top_category_text(review: ContentReview) -> str:
    """The list's "top category": the model's top score ("hate 0.91"); for a decision a rule or a
    hash bank made, that match's category and which kind decided ("insult (rule)", "sexual (hash
    bank)": the review page names the rule or bank); for a decision that names a category (a moderator's), that category, with
    the model's top score of the review where a model scored it (`with_model_score`):
    "harassment (moderator; model 0.62)"."""
    decision = review.decision
    match = deciding_match(decision)
    if match is not None:
        return f"{match.get('category') or decision.label} ({'hash bank' if match_bank(match) else 'rule'})"
    if decision is not None and decision.category:
        model = getattr(review, "model_score", None)
        who = "moderator" if decision.source == DecisionSource.MODERATOR else str(decision.source)
        return f"{decision.category} ({who}{f'; model {model:.2f}' if model is not None else ''})"
    top = top_category(decision)
    return f"{top[0]} {top[1]:.2f}" if top else "—"


def with_model_score(reviews):
    """Annotate `model_score`: the highest score of the review's newest scored decision (the
    model's), for rows a moderator decided. One indexed subquery a row (decisions by review)."""
    scored = (Decision.objects.filter(review=OuterRef("pk"), score__isnull=False)
              .exclude(source=DecisionSource.MODERATOR).order_by("-id").values("score")[:1])
    return reviews.annotate(model_score=Subquery(scored))


@dataclass(frozen=True)
class ScoreRow:
    category: str
    score: float
    review_at: float
    reject_at: float

    @property
    def verdict(self) -> str:
        if self.score >= self.reject_at:
            return ReviewStatus.REJECTED
        return ReviewStatus.MANUAL_REVIEW if self.score >= self.review_at else ReviewStatus.APPROVED

    @property
    def verdict_words(self) -> str:
        return ReviewStatus(self.verdict).label

    @property
    def percent(self) -> int:
        return round(max(0.0, min(self.score, 1.0)) * 100)


def score_rows(decision: Decision | None, fallback: ModerationPolicy) -> list[ScoreRow]:
    """Each category score of the model's decision against the thresholds of the policy that
    made it (the active one for a decision without a policy), highest first."""
    scores = (decision.category_scores if decision else None) or {}
    policy = decision.policy if decision and decision.policy_id else fallback
    rows = [ScoreRow(c, float(s), *thresholds_for(policy, c)) for c, s in scores.items()]
    return sorted(rows, key=lambda r: (-r.score, r.category))


def model_decision(review: ContentReview) -> Decision | None:
    """The decision whose scores the page shows: the review's own, or, when a moderator decided
    last, the newest one with scores (the model's), so the scores stay in view."""
    if review.decision and review.decision.category_scores:
        return review.decision
    return (Decision.objects.filter(review=review).exclude(category_scores={}).select_related("policy")
            .order_by("-id").first())


def pile_on_html(review: ContentReview) -> SafeString | str:
    """The pile-on mark: its kind in words, the reason in its title (the review's `pile_on`,
    moderation.models.PileOn); "" for none."""
    if not review.pile_on:
        return ""
    kind = PileOn(review.pile_on) if review.pile_on in PileOn.values else None
    return format_html('<span class="badge pile-on pile-on-{}" title="{}">pile-on: {}</span>', review.pile_on,
                       kind.label if kind else review.pile_on, kind.value.replace("_", " ") if kind else review.pile_on)


def reasons_html(summary: ReportSummary | None) -> SafeString | str:
    """The most common reasons with their counts ("spam ×3, hate ×1 and 2 more"), escaped."""
    if summary is None or not summary.reasons:
        return "—"
    shown = format_html_join(", ", '<span class="report-reason">{} ×{}</span>', summary.shown_reasons)
    if summary.more_reasons:
        return format_html("{} and {} more", shown, summary.more_reasons)
    return shown


def kinds_text(summary: ReportSummary | None) -> str:
    """Who the reports speak for ("User ×3, Trusted flagger ×1"), in words."""
    if summary is None:
        return ""
    labels = dict(ReportKind.choices)
    return ", ".join(f"{labels.get(kind, kind).split(' (')[0]} ×{n}" for kind, n in summary.kinds)
