"""The framework ceiling: what the same gunicorn, workers and settings serve when a request does
nothing but the least SQL its path must execute (issue 17; docs/benchmarks.md).

`bench.wsgi:application` is the project's application (config.wsgi) with two bare Django views
beside it, under /bench/ceiling/: no DRF, no middleware, no ORM; a `WSGIRequest`, a
`django.db.connection.cursor()` in one transaction, a `JsonResponse`. Django's request signals
are sent as its handler sends them, so the connections are managed as for the project's views
(CONN_MAX_AGE, health checks). Every other path goes to the project unchanged.

- POST /bench/ceiling/reviews/?client=<api client id>: what a submission must write at the least,
  in one transaction: the content row, its pending review and the review's first history row
  (the invariant checker counts one history row per version: docs/design.md, invariant 4); 201
  and the review's id (200 when the external id was submitted before). It does not authenticate
  or enqueue.
- POST /bench/ceiling/callback/: bench/ingest.py's pgbench transaction for a signed callback
  (its signature is not verified): the inbox upsert under the provider `ceiling`; for a new
  event, the conditional update of the review its idempotency key names (still `processing`:
  the ceiling never decides) and a transition row; a duplicate is answered by the upsert alone.

Only the benchmarks start gunicorn with it; the product never imports bench (.importlinter).
"""

from __future__ import annotations

import json
import uuid

from django.core import signals
from django.core.handlers.wsgi import WSGIRequest
from django.db import connection, transaction
from django.http import JsonResponse

from config.wsgi import application as project

PREFIX = "/bench/ceiling/"

_INSERT_CONTENT = """
INSERT INTO moderation_content (id, client_id, external_id, kind, text, media_url, metadata, created_at)
VALUES (%s, %s, %s, %s, %s, '', '{}', now())
ON CONFLICT (client_id, external_id) DO NOTHING
RETURNING id
"""
_INSERT_REVIEW = """
INSERT INTO moderation_contentreview (id, content_id, client_id, status, version, worker_id, provider_request_id,
    last_enqueued_at, created_at, updated_at)
VALUES (%s, %s, %s, 'pending', 1, '', '', now(), now(), now())
"""
_INSERT_HISTORY = """
INSERT INTO moderation_historicalcontentreview (id, status, version, worker_id, provider_request_id, created_at,
    updated_at, history_date, history_type, client_id, content_id)
VALUES (%s, 'pending', 1, '', '', now(), now(), now(), '+', %s, %s)
"""
_UPSERT_CALLBACK = """
INSERT INTO callbacks_providercallback (provider, provider_event_id, event_type, idempotency_key,
    provider_request_id, payload_json, headers, received_at, processed_at, outcome, outcome_detail,
    duplicate_count, process_failures, process_error)
VALUES ('ceiling', %s, %s, %s, %s, %s, '{}', now(), now(), 'applied', '', 0, 0, '')
ON CONFLICT (provider, provider_event_id) DO UPDATE
    SET duplicate_count = callbacks_providercallback.duplicate_count + 1, last_duplicate_at = EXCLUDED.received_at
RETURNING xmax = 0
"""
_UPDATE_REVIEW = """
UPDATE moderation_contentreview SET version = version + 1, updated_at = now()
WHERE id = (SELECT review_id FROM moderation_moderationrequest WHERE idempotency_key = %s) AND status = 'processing'
RETURNING id
"""
_INSERT_TRANSITION = """
INSERT INTO audit_reviewtransition (review_id, from_status, to_status, cause, actor, actor_id, idempotency_key,
    job_id, attempt_no, reason, created_at)
VALUES (%s, 'processing', 'processing', 'provider_callback', 'worker', 'ceiling', %s, '', 1, '', now())
"""


class BadRequest(ValueError):
    pass


def submit(request: WSGIRequest) -> JsonResponse:
    try:
        client_id = int(request.GET["client"])
        data = json.loads(request.body)
        external_id, kind, text = str(data["external_id"]), str(data["content_type"]), str(data.get("text", ""))
    except (KeyError, ValueError, TypeError) as exc:
        raise BadRequest(f"expected ?client=<id> and a JSON body with external_id and content_type ({exc})") from exc
    content_id, review_id = uuid.uuid4(), uuid.uuid4()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_INSERT_CONTENT, [content_id, client_id, external_id, kind, text])
        if cursor.fetchone() is None:
            return JsonResponse({"external_id": external_id, "created": False}, status=200)
        cursor.execute(_INSERT_REVIEW, [review_id, content_id, client_id])
        cursor.execute(_INSERT_HISTORY, [review_id, client_id, content_id])
    return JsonResponse({"id": str(review_id), "external_id": external_id, "status": "pending"}, status=201)


def callback(request: WSGIRequest) -> JsonResponse:
    try:
        event_id = request.headers["webhook-id"]
        body = json.loads(request.body)
        data = body["data"]
        key, provider_request_id = uuid.UUID(str(data["idempotency_key"])), str(data["id"])
    except (KeyError, ValueError, TypeError) as exc:
        raise BadRequest(f"expected a webhook-id header and a moderation.completed body ({exc})") from exc
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_UPSERT_CALLBACK, [event_id, str(body.get("type", "")), key, provider_request_id,
                                          request.body.decode()])
        if not cursor.fetchone()[0]:
            return JsonResponse({"status": "duplicate"})
        cursor.execute(_UPDATE_REVIEW, [key])
        row = cursor.fetchone()
        if row is not None:
            cursor.execute(_INSERT_TRANSITION, [row[0], key])
    return JsonResponse({"status": "applied" if row else "ignored"})


CEILINGS = {PREFIX + "reviews/": submit, PREFIX + "callback/": callback}


def application(environ, start_response):
    view = CEILINGS.get(environ.get("PATH_INFO", ""))
    if view is None:
        return project(environ, start_response)
    # As django.core.handlers.wsgi.WSGIHandler: request_started now, request_finished when the
    # server closes the response (both close connections past CONN_MAX_AGE or unusable).
    signals.request_started.send(sender=__name__, environ=environ)
    request = WSGIRequest(environ)
    if request.method != "POST":
        response = JsonResponse({"error": "method_not_allowed"}, status=405)
    else:
        try:
            response = view(request)
        except BadRequest as exc:
            response = JsonResponse({"error": "bad_request", "detail": str(exc)}, status=400)
    start_response(f"{response.status_code} {response.reason_phrase}", [*response.items()])
    return response
