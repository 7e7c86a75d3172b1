"""One causal timeline of a review, merged from every record the pipeline keeps.

Submission, enqueued jobs, operations (requests) and each provider attempt, callbacks received,
transitions, history rows, decisions, user reports and appeals, and the recorded non-events
(lost claims, stale results...), ordered as the database recorded them, each with the
correlation ids it carries. The admin timeline page and `manage.py review_timeline` render all
of it; the timeline API renders `Entry.as_client_json()`, which leaves out who at the platform
handled the review and every internal error (docs/design.md, invariant 14).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from audit.models import PipelineEvent, ReviewTransition
from callbacks.models import ProviderCallback
from moderation.models import Appeal, ContentErasure, ContentReview, Decision, ModeratorNote, ProviderAttempt, Report, ReportKind, SecondLook
from moderation.transparency.reasons import statement_of_reasons

# Same instant: a cause before its effects (a job before its claim, a claim before an attempt).
_RANK = {
    "submitted": 0, "job_enqueued": 1, "event": 2, "operation": 3, "attempt_started": 4, "attempt_finished": 5,
    "callback": 6, "report": 6, "appeal": 6, "decision": 7, "erasure": 7, "transition": 8, "history": 9, "note": 10,
}
# What a client does not see of its own review's timeline: who at the platform handled it
# (moderators, worker hosts), internal error texts and reasons, raw provider bodies.
_INTERNAL_DETAIL = {"actor", "user", "error", "last_error", "detail", "change_reason", "reason", "moderator"}
# The kinds a client can be shown: moderators' notes are internal, and the API never returns them.
KINDS = tuple(kind for kind in _RANK if kind != "note")


@dataclass
class Entry:
    at: datetime
    kind: str
    title: str
    detail: dict[str, Any] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)
    source: str = ""  # "<table>:<id>", to find the row
    payload: str | None = None  # a callback's raw body
    client_view: dict[str, Any] | None = None  # what a client reads instead of title and detail

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        del data["client_view"]
        data["at"] = self.at.isoformat()
        return data

    def as_client_json(self) -> dict[str, Any]:
        data = {**self.as_json(), **(self.client_view or {})}
        data["detail"] = {k: v for k, v in data["detail"].items() if k not in _INTERNAL_DETAIL}
        data["ids"] = {k: v for k, v in data["ids"].items() if k != "worker_id"}
        data["payload"] = None
        return data


def _actor(actor: str, actor_id: str) -> str:
    """A transition's actor as stored (`system:<id>`), but a report kind that sent a review to a
    human named as the workplace names it ("system: DSA notice (Art. 16)", not "dsa_notice")."""
    if actor_id in ReportKind.values:
        return f"{actor}: {ReportKind(actor_id).label}"
    return f"{actor}:{actor_id}" if actor_id else actor


def _ids(**values) -> dict[str, str]:
    return {k: str(v) for k, v in values.items() if v not in (None, "")}


def _head(rows: QuerySet, at: str, first: int | None) -> list:
    """The rows of `rows` in the order of their time `at`; with `first`, only the first `first`
    and any tied with the last of them. An entry among a timeline's first `first` has fewer than
    `first` entries before it, so its row is among its record's first `first` by time: a page of
    a review with 10,000 reports reads a page of reports, not all of them."""
    if first is None:
        return list(rows)
    head = list(rows.order_by(at, "pk")[:first])
    if len(head) == first:
        last = getattr(head[-1], at)
        head += rows.filter(**{at: last}).exclude(pk__in=[r.pk for r in head if getattr(r, at) == last])
    return head


def review_timeline(review: ContentReview, *, notes: bool = False, first: int | None = None) -> list[Entry]:
    """Every entry of the review's timeline, or its first `first`; moderators' internal notes
    only with `notes` (the admin page and the operator command ask for them; the client API
    never does)."""
    content = review.content
    entries = [Entry(content.created_at, "submitted", f"submitted by {review.client} as {content.kind}",
                     {"external_id": content.external_id}, _ids(review_id=review.pk, content_id=content.pk),
                     f"content:{content.pk}")]
    entries += _events(review, first)
    for request in _head(review.requests.select_related("supersedes"), "created_at", first):
        supersedes = f", supersedes {request.supersedes.idempotency_key}" if request.supersedes_id else ""
        entries.append(Entry(request.created_at, "operation", f"operation started ({request.cause}{supersedes})",
                             {"status": request.status, "attempts": request.attempt_no, "max_attempts": request.max_attempts,
                              "last_error": request.last_error},
                             _ids(idempotency_key=request.idempotency_key, provider_request_id=request.provider_request_id),
                             f"request:{request.pk}"))
    entries += _attempts(review, first)
    entries += _callbacks(review, first)
    entries += _decisions(review, first)
    entries += _reports_and_appeals(review, first)
    entries += _erasure(review)
    for t in _head(ReviewTransition.objects.filter(review=review), "created_at", first):
        entries.append(Entry(t.created_at, "transition", f"{t.from_status} -> {t.to_status} ({t.cause})",
                             {"actor": _actor(t.actor, t.actor_id), "reason": t.reason},
                             _ids(idempotency_key=t.idempotency_key, job_id=t.job_id, attempt_no=t.attempt_no),
                             f"transition:{t.pk}"))
    for h in _head(review.history.select_related("history_user"), "history_date", first):
        entries.append(Entry(h.history_date, "history", f"history: status {h.status} (version {h.version})",
                             {"change_reason": h.history_change_reason or "", "user": str(h.history_user or "")},
                             _ids(idempotency_key=h.active_idempotency_key), f"history:{h.history_id}"))
    if notes:
        entries += [Entry(n.created_at, "note", f"note by {n.author}", {"text": n.text}, {}, f"note:{n.pk}")
                    for n in _head(ModeratorNote.objects.filter(review=review).select_related("author"),
                                   "created_at", first)]
        entries += _second_looks(review, first)
    return sorted(entries, key=lambda e: (e.at, _RANK[e.kind], e.source))[:first]


def _second_looks(review: ContentReview, first: int | None) -> list[Entry]:
    """Second looks asked for and settled (internal, like notes: the client is told only of a
    decision that changed, by that decision)."""
    entries = []
    looks = SecondLook.objects.filter(review=review).select_related("requested_by", "resolved_by")
    for look in _head(looks, "created_at", first):
        entries.append(Entry(look.created_at, "note", f"second look asked by {look.requested_by}",
                             {"reason": look.reason, "decision": look.decision_id}, {}, f"second_look:{look.pk}"))
        if look.resolved_at:
            entries.append(Entry(look.resolved_at, "note", f"second look {look.get_status_display().lower()}",
                                 {"by": str(look.resolved_by), "reason": look.resolution_reason,
                                  "new_decision": look.resolution_id}, {}, f"second_look:{look.pk}"))
    return entries


def _erasure(review: ContentReview) -> list[Entry]:
    """The content's erasure: when, why and by whom (at most one: ContentErasure)."""
    erasure = ContentErasure.objects.filter(review=review).first()
    if erasure is None:
        return []
    return [Entry(erasure.erased_at, "erasure", "content erased",
                  {"reason": erasure.reason, "actor": f"{erasure.actor}:{erasure.actor_id}" if erasure.actor_id else erasure.actor,
                   "stopped_moderation": erasure.stopped_moderation or None},
                  {}, f"erasure:{erasure.pk}")]


def _events(review: ContentReview, first: int | None) -> list[Entry]:
    entries = []
    for event in _head(PipelineEvent.objects.filter(review=review), "created_at", first):
        kind = "job_enqueued" if event.kind == "job_enqueued" else "event"
        entries.append(Entry(event.created_at, kind, event.get_kind_display(), dict(event.detail),
                             _ids(idempotency_key=event.idempotency_key, job_id=event.job_id, worker_id=event.worker_id),
                             f"event:{event.pk}"))
    return entries


def _attempts(review: ContentReview, first: int | None) -> list[Entry]:
    entries = []
    # An attempt's end follows its start: the attempts that end early enough started earlier still.
    for a in _head(ProviderAttempt.objects.filter(request__review=review).select_related("request"), "started_at", first):
        ids = _ids(idempotency_key=a.request.idempotency_key, attempt_no=a.attempt_no, job_id=a.job_id, worker_id=a.worker_id)
        entries.append(Entry(a.started_at, "attempt_started", f"attempt {a.attempt_no} sent to {a.provider}", {}, ids,
                             f"attempt:{a.pk}"))
        if a.finished_at:
            entries.append(Entry(a.finished_at, "attempt_finished", f"attempt {a.attempt_no}: {a.get_outcome_display()}",
                                 {"latency_ms": a.latency_ms, "http_status": a.http_status, "error": a.error}, ids,
                                 f"attempt:{a.pk}"))
    return entries


def _callbacks(review: ContentReview, first: int | None) -> list[Entry]:
    keys = review.requests.values("idempotency_key")
    return [
        Entry(cb.received_at, "callback", f"callback {cb.event_type or 'received'}: {cb.outcome or 'unprocessed'}",
              {"duplicate_count": cb.duplicate_count, "processed_at": cb.processed_at.isoformat() if cb.processed_at else None,
               "detail": cb.outcome_detail},
              _ids(idempotency_key=cb.idempotency_key, provider_event_id=cb.provider_event_id,
                   provider_request_id=cb.provider_request_id),
              f"callback:{cb.pk}", payload=cb.payload_json)
        for cb in _head(ProviderCallback.objects.filter(idempotency_key__in=keys), "received_at", first)
    ]


def _decisions(review: ContentReview, first: int | None) -> list[Entry]:
    entries = []
    for decision in _head(Decision.objects.filter(review=review).select_related("policy", "moderator", "request",
                                                                                  "review__content"),
                          "created_at", first):
        statement = statement_of_reasons(decision)
        entries.append(Entry(decision.created_at, "decision", f"decision: {decision.label} by {decision.decided_by}",
                             {"score": decision.score, "policy_version": statement["policy_version"],
                              "category": decision.category, "explanation": decision.explanation,
                              "reason": decision.reason, "canned_reasons": ", ".join(decision.reason_codes or []),
                              # whether the moderator's words went to the client (docs/workplace.md, "Canned reasons")
                              "reason_sent": None if decision.reason_shared is None or not decision.reason
                              else ("yes" if decision.reason_shared else "no")},
                             _ids(idempotency_key=decision.request.idempotency_key if decision.request else None,
                                  callback_id=decision.callback_id),
                             f"decision:{decision.pk}",
                             client_view={"title": f"decision: {decision.label} by {statement['decided_by']}",
                                          "detail": statement}))
    return entries


def _reports_and_appeals(review: ContentReview, first: int | None) -> list[Entry]:
    entries = [
        Entry(report.created_at, "report", f"reported by {report.reporter_id} as {report.reason}"
              + ("" if report.kind == ReportKind.USER else f" ({report.get_kind_display()})"),
              {"reported_as": report.reason, "text": report.detail}, _ids(report_id=report.pk), f"report:{report.pk}")
        for report in _head(Report.objects.filter(review=review), "created_at", first)
    ]
    for appeal in _head(Appeal.objects.filter(review=review), "created_at", first):  # resolved after filed
        ids = _ids(appeal_id=appeal.pk)
        entries.append(Entry(appeal.created_at, "appeal", f"appeal filed by {appeal.appellant_id}",
                             {"statement": appeal.statement, "appealed_decision": appeal.decision_id},
                             ids, f"appeal:{appeal.pk}"))
        if appeal.resolved_at:
            entries.append(Entry(appeal.resolved_at, "appeal", f"appeal {appeal.status}",
                                 {"resolution": appeal.resolution_id}, ids, f"appeal:{appeal.pk}"))
    return entries
