"""What one unit of work costs the database, pinned so that a regression fails: the statements
Django sends (transaction control left out) and the protocol round trips (BEGIN, COMMIT and
SAVEPOINT included: each waits for PostgreSQL, which shares the cores). docs/design.md,
"Scale"; the measured history is in docs/benchmarks.md."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from moderation import services, tasks
from moderation.models import (
    FINAL_STATUSES, ContentReview, ModerationRequest, Report, ReviewStatus, Strike, TransparencyStatement,
)
from moderation.providers import Accepted
from tests.callbacks.conftest import SECRET, completed, deliver
from tests.helpers import connection_kept, count_round_trips, statements_compiled, submit
from tests.helpers_media import b64, encoded, picture

pytestmark = pytest.mark.django_db(transaction=True)

# Runs before the one measured, as in a process that has been running: its connection has its
# statements prepared (settings.DB_PREPARE_THRESHOLD; preparing costs one round trip, once) and
# the policy read once.
WARM = 6
TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE SAVEPOINT")


def statements(cost: count_round_trips) -> list[str]:
    return [sql for sql in cost.statements if not sql.upper().startswith(TRANSACTION_CONTROL)]


def assert_cost(cost: count_round_trips, *, statements_at_most: int, round_trips_at_most: int,
                rate_counted: bool | None = None) -> None:
    """`rate_counted`: whether the request's one statement of the shared rate limits
    (moderation/web/throttles.py, `rate_hit`) is among them (None: not asked)."""
    if rate_counted is not None:
        assert sum("moderation_ratecount" in sql for sql in statements(cost)) == int(rate_counted), str(cost)
    assert len(statements(cost)) <= statements_at_most, str(cost)
    assert cost.round_trips <= round_trips_at_most, str(cost)


@pytest.fixture
def dispatched(api_client, scripted, settings):
    """A review whose operation the (asynchronous) provider accepted: its callback comes next.
    Callbacks decided other reviews before, as in a process that has been running."""
    settings.CALLBACK_SECRETS = {"scripted": [SECRET]}
    scripted.default = Accepted("prov-1")
    requests = []
    for _ in range(WARM + 1):
        review = submit(api_client)
        tasks.moderate_review(review.pk)
        requests.append(ModerationRequest.objects.get(review=review))
    # (0.95: the initial policy rejects `hate` from 0.91, DEFAULT_POLICY)
    for number, earlier in enumerate(requests[:-1]):  # approvals and rejections (a statement of reasons)
        deliver(completed(earlier.idempotency_key, score=0.95 if number % 3 == 2 else 0.1), event_id=f"evt-warm-{number}",
                provider="scripted")
    return requests[-1]


def test_a_new_callback_that_decides_a_review(dispatched):
    with count_round_trips() as cost:
        answer = deliver(completed(dispatched.idempotency_key), event_id="evt-1", provider="scripted")
    assert answer.json()["outcome"] == "applied"
    assert ContentReview.objects.get(pk=dispatched.review_id).status == ReviewStatus.APPROVED
    # Was 12 statements, 16 round trips: upsert; BEGIN; lock the inbox row; lock the review;
    # read the operation (and the newest policy's id); decision + outbox row + the operation
    # completed; the review's conditional UPDATE; history + transition rows; the inbox row
    # processed; COMMIT.
    assert_cost(cost, statements_at_most=9, round_trips_at_most=11, rate_counted=True)


@pytest.mark.parametrize("reviews", ["dispatched", "dispatched_by_author"])
@pytest.mark.parametrize("score", [0.0, 0.95])
def test_a_callback_compiles_no_statement(reviews, score, request):
    """Every statement of a callback's unit of work (the inbox row's lock and its processed mark,
    the reviews' and authors' locks, the operation's read and completion, the transition, the
    decision's rows, a strike) was compiled before, by an earlier callback: docs/design.md, "Hot
    paths"."""
    dispatched = request.getfixturevalue(reviews)
    with statements_compiled() as compiled:
        answer = deliver(completed(dispatched.idempotency_key, score=score), event_id="evt-1", provider="scripted")
    assert answer.json()["outcome"] == "applied"
    assert compiled == []


def test_a_duplicate_callback(dispatched):
    body = completed(dispatched.idempotency_key)
    for _ in range(WARM):
        deliver(body, event_id="evt-1", provider="scripted")
    with count_round_trips() as cost:
        answer = deliver(body, event_id="evt-1", provider="scripted")
    assert answer.json()["duplicate"] is True
    assert_cost(cost, statements_at_most=2, round_trips_at_most=2, rate_counted=True)  # and the inbox upsert, nothing else


@pytest.fixture
def http(api_client):
    http = APIClient()
    http.credentials(HTTP_AUTHORIZATION=f"Bearer {api_client.token}")
    return http


def test_a_submission(http):
    with connection_kept():  # (its statements prepared, as in a process that has been running)
        for number in range(WARM):
            assert http.post("/api/v1/reviews/", {"external_id": f"warm-{number}", "content_type": "text",
                                                  "text": "hi"}, format="json").status_code == 201
    with count_round_trips() as cost, statements_compiled() as compiled:
        answer = http.post("/api/v1/reviews/", {"external_id": "x1", "content_type": "text", "text": "hello"},
                           format="json")
    assert answer.status_code == 201
    assert compiled == []  # every statement compiled by the earlier submissions (docs/design.md, "Hot paths")
    # Was 7 statements, 10 round trips: the token's client; content + review + its history row
    # + its job_enqueued event + its job in the ORM broker (no transaction opened: one
    # statement; no lookup before it, the unique constraint tells a repeat).
    assert_cost(cost, statements_at_most=3, round_trips_at_most=3, rate_counted=True)


def test_a_submission_by_an_author(http):
    with connection_kept():
        for number in range(WARM):
            assert http.post("/api/v1/reviews/", {"external_id": f"warm-{number}", "content_type": "text",
                                                  "text": "hi", "author_id": "ann"}, format="json").status_code == 201
    with count_round_trips() as cost, statements_compiled() as compiled:
        answer = http.post("/api/v1/reviews/", {"external_id": "x1", "content_type": "text", "text": "hello",
                                                "author_id": "ann"}, format="json")
    assert answer.status_code == 201 and answer.json()["author_id"] == "ann"
    assert compiled == []  # every statement compiled by the earlier submissions (docs/design.md, "Hot paths")
    # One statement more than without an author: the author found or created, with its standing
    # (no lock taken); the answer names it without reading it back.
    assert_cost(cost, statements_at_most=4, round_trips_at_most=4, rate_counted=True)


def test_a_resubmission_by_an_author(http):
    body = {"external_id": "x1", "content_type": "text", "text": "hello", "author_id": "ann"}
    for _ in range(WARM + 1):
        http.post("/api/v1/reviews/", body, format="json")
    with count_round_trips() as cost:
        answer = http.post("/api/v1/reviews/", body, format="json")
    assert answer.status_code == 200 and answer.json()["author_id"] == "ann"
    # As a resubmission without one, and the author: the existing review reads it in its join.
    assert_cost(cost, statements_at_most=7, round_trips_at_most=7, rate_counted=True)


def test_a_resubmission(http):
    body = {"external_id": "x1", "content_type": "text", "text": "hello"}
    for _ in range(WARM + 1):  # (the first creates it)
        http.post("/api/v1/reviews/", body, format="json")
    with count_round_trips() as cost:
        assert http.post("/api/v1/reviews/", body, format="json").status_code == 200
    # The token's client; the insert the unique constraint refuses; the existing review; its
    # report count; its appeals. (A repeat costs one statement more so that a new submission,
    # the common case, costs one fewer.)
    assert_cost(cost, statements_at_most=6, round_trips_at_most=6, rate_counted=True)


def test_a_moderate_review_job_of_the_local_provider(api_client, settings):
    settings.MODERATION_PROVIDER = "local"
    # The one-review path (what a batch job falls back to, e.g. for the circuit's trial call);
    # a batch's cost is pinned in test_batch.py.
    settings.MODERATION_BATCH_SIZE = 1
    for _ in range(WARM):  # (the first also loads the model and writes the circuit row)
        tasks.moderate_review(submit(api_client).pk)
    review = submit(api_client)
    with count_round_trips() as cost:
        tasks.moderate_review(review.pk)
    assert ContentReview.objects.get(pk=review.pk).status == ReviewStatus.APPROVED
    # Was 25 statements, 31 round trips. The claim and dispatch are as they were; finalize as
    # for a callback (without the inbox).
    assert_cost(cost, statements_at_most=20, round_trips_at_most=26)


# --- the writes the authors, notices and DSA issues added to a decision ----------------------------


@pytest.fixture
def dispatched_by_author(api_client, scripted, settings):
    """As `dispatched`, for reviews of the author "ann": a rejection counts a strike."""
    settings.CALLBACK_SECRETS = {"scripted": [SECRET]}
    scripted.default = Accepted("prov-1")
    requests = []
    for number in range(WARM + 2):
        review, _ = services.review_submit(client=api_client, external_id=f"by-ann-{number}", kind="text",
                                           text="a perfectly friendly sentence", author_id="ann")
        tasks.moderate_review(review.pk)
        requests.append(ModerationRequest.objects.get(review=review))
    for number, earlier in enumerate(requests[:-1]):  # WARM rejections (strikes), then an approval
        deliver(completed(earlier.idempotency_key, score=0.95 if number < WARM else 0.0), event_id=f"evt-warm-{number}",
                provider="scripted")
    return requests[-1]


def test_a_callback_that_rejects_an_authors_review(dispatched_by_author):
    """The decision, its statement of reasons (DSA), the author's strike and points, in one callback."""
    with count_round_trips() as cost:
        answer = deliver(completed(dispatched_by_author.idempotency_key, score=0.95), event_id="evt-1",
                         provider="scripted")
    assert answer.json()["outcome"] == "applied"
    review = ContentReview.objects.get(pk=dispatched_by_author.review_id)
    assert review.status == ReviewStatus.REJECTED
    assert Strike.objects.filter(review=review).count() == 1
    assert TransparencyStatement.objects.filter(decision=review.decision).count() == 1
    # A new callback's statements (above), and three: the author's row locked (with the batch's
    # reviews); its lapsed strikes ended and the review's active strike read, in one; the new
    # strike, the author's points and the statement of reasons, in one. Was 14 statements, 16
    # round trips, each of the five writes a statement of its own.
    assert_cost(cost, statements_at_most=12, round_trips_at_most=14, rate_counted=True)


def test_a_callback_that_approves_an_authors_review(dispatched_by_author):
    """The common case of an author's review: approved, with no strike to revoke."""
    with count_round_trips() as cost:
        answer = deliver(completed(dispatched_by_author.idempotency_key, score=0.0), event_id="evt-1",
                         provider="scripted")
    assert answer.json()["outcome"] == "applied"
    assert ContentReview.objects.get(pk=dispatched_by_author.review_id).status == ReviewStatus.APPROVED
    # A new callback's, and the author's row locked (with the batch's reviews: a rejection would
    # need it). Whether the review has a strike to revoke is asked in the decision's statement.
    assert_cost(cost, statements_at_most=10, round_trips_at_most=12, rate_counted=True)


def test_a_callback_that_decides_a_reported_review(dispatched):
    """The decision of a review its users reported while it waited: each report resolved."""
    for reporter in ("r-1", "r-2"):
        services.report_file(review_id=dispatched.review_id, reporter_id=reporter, reason="hate")
    with count_round_trips() as cost:
        answer = deliver(completed(dispatched.idempotency_key, score=0.95), event_id="evt-1", provider="scripted")
    assert answer.json()["outcome"] == "applied"
    assert not Report.objects.filter(review_id=dispatched.review_id, resolved_at__isnull=True).exists()
    # A new callback's statements, and three more: the reports resolved (one UPDATE for all of
    # them), the reporters' notification, the statement of reasons.
    assert_cost(cost, statements_at_most=12, round_trips_at_most=14, rate_counted=True)


def test_a_moderate_review_job_of_an_uploaded_image(api_client, http, settings):
    """The image's PDQ hash stored and matched against the banks, as the local provider judges it."""
    settings.MODERATION_PROVIDER = "local"
    settings.MODERATION_BATCH_SIZE = 1

    def upload(number: int):
        answer = http.post("/api/v1/reviews/", {"external_id": f"img-{number}", "content_type": "image",
                                                "image_base64": b64(encoded(picture(number)))}, format="json")
        assert answer.status_code == 201, answer.content
        return answer.json()["id"]

    for number in range(WARM):
        tasks.moderate_review(upload(number))
    review_id = upload(WARM)
    with count_round_trips() as cost:
        tasks.moderate_review(review_id)
    assert ContentReview.objects.get(pk=review_id).status in FINAL_STATUSES
    # The one-review path of a text (test_a_moderate_review_job_of_the_local_provider) and the
    # image's own: its bytes read, its PDQ hash stored, the bank matches kept on the operation.
    assert_cost(cost, statements_at_most=22, round_trips_at_most=28)
