"""The query shapes that keep content search within its budget at 1M reviews
(docs/benchmarks.md, "Content search at 1M reviews"): the matching contents read from their
indexes first when few enough (the same answers as the condition through the join), the
fallback's "does any content have these words?" asked of the GIN index, and the "reported as"
filter served by its index."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.models import Q
from django.test.utils import CaptureQueriesContext

from moderation import services
from moderation.admin.filters import filtered_reviews
from moderation.privacy.erasure import content_erase
from moderation.models import Content, ContentReview, ModerationQueue, ReportKind, ReviewQueue
from moderation.observability import search
from moderation.observability.search import SearchRule, content_matches, matching_content_ids, words_query
from tests.moderation import test_workplace_pages
from tests.moderation.test_content_search import found, in_language, listed
from tests.moderation.test_workplace_pages import LIST, submitted

moderator = test_workplace_pages.moderator  # a fixture: a logged-in moderator's test client


def _filler_contents(client_pk: int, n: int = 20000) -> None:
    """Enough contents for the planner to weigh an index against a scan, as it does at 1M."""
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO moderation_content (id, client_id, external_id, kind, text, media_url, metadata,"
                       " created_at) SELECT gen_random_uuid(), %s, 'f' || i, 'text', 'filler text w' || i, '',"
                       " '{}', now() FROM generate_series(1, %s) AS i", [client_pk, n])
        # What autovacuum does: the rows just inserted move from the GIN's pending list into it.
        cursor.execute("SELECT gin_clean_pending_list('content_search_vector_idx')")
        cursor.execute("ANALYZE moderation_content")


@pytest.fixture
def texts(api_client):
    """Reviews to search: words in two languages, a glued word, one erased."""
    made = {
        "idiot": in_language(submitted(api_client, text="you are an idiot", external_id="a"), "en"),
        "bodoh": in_language(submitted(api_client, text="kamu bodoh sekali", external_id="b"), "id"),
        "affixed": in_language(submitted(api_client, text="jangan membodohi saya", external_id="c"), "id"),
        "glued": in_language(submitted(api_client, text="youareanidiotok", external_id="d"), "en"),
        "erased": in_language(submitted(api_client, text="another idiot here", external_id="e"), "en"),
    }
    content_erase(review_id=made["erased"].pk, actor="admin", actor_id="ops", reason="user request")
    return made


TERMS = ["idiot", "idi", "IDIO", "bodoh", "membodohi", "anidiot", "arbod", "ok", '"you are"', "idiot -you", "youareanidiotok"]


@pytest.mark.django_db
class TestTheSameAnswers:
    @pytest.mark.parametrize("term", TERMS)
    def test_ids_read_first_or_the_condition_through_the_join_find_the_same_reviews(self, texts, monkeypatch, term):
        by_ids = found(texts.values(), term)
        monkeypatch.setattr(search, "MATCHED_IDS_UP_TO", 0)  # every term "too common": the join
        assert found(texts.values(), term) == by_ids
        assert texts["erased"].pk not in by_ids

    def test_the_expected_reviews(self, texts):
        assert found(texts.values(), "idiot") == {texts["idiot"].pk}
        assert found(texts.values(), "bodoh") == {texts["bodoh"].pk, texts["affixed"].pk}
        assert found(texts.values(), "idi") == {texts["idiot"].pk, texts["glued"].pk}
        assert found(texts.values(), "anidiot") == {texts["glued"].pk}

    def test_more_matches_than_the_bound_leave_the_condition_to_the_page_query(self, texts, monkeypatch):
        words = Q(search_vector=words_query("bodoh"))
        assert sorted(matching_content_ids(words)) == sorted([texts["bodoh"].content_id, texts["affixed"].content_id])
        monkeypatch.setattr(search, "MATCHED_IDS_UP_TO", 1)
        assert matching_content_ids(words) is None


@pytest.mark.django_db
class TestTheWordsCheck:
    def test_a_term_no_content_has_asks_the_index_alone_and_falls_back(self, texts):
        with CaptureQueriesContext(connection) as queries:
            _, rule = content_matches(ContentReview.objects.all(), "anidiot")
        assert rule == SearchRule.SUBSTRING_FALLBACK
        words = [q["sql"] for q in queries.captured_queries if "@@" in q["sql"] and not q["sql"].startswith("EXPLAIN")]
        assert len(words) == 1, words  # the ids of the contents with the words: none; no EXISTS over the reviews
        assert "moderation_contentreview" not in words[0], words

    def test_words_some_content_has_but_no_review_searched_fall_back_to_substrings(self, texts):
        scope = ContentReview.objects.filter(pk=texts["glued"].pk)
        assert content_matches(ContentReview.objects.all(), "idiot")[1] == SearchRule.WORDS
        assert content_matches(scope, "idiot")[1] == SearchRule.SUBSTRING_FALLBACK

    @pytest.mark.parametrize("term", ["anidiot", "insulting"])  # the second: its variants by prefix too
    def test_the_planner_reads_the_words_from_the_gin_index_not_a_scan(self, api_client, term):
        in_language(submitted(api_client, text="youareanidiotok", external_id="a"), "en")
        in_language(submitted(api_client, text="insults everywhere", external_id="b"), "")
        _filler_contents(api_client.pk)
        with CaptureQueriesContext(connection) as queries:
            matching_content_ids(Q(search_vector=words_query(term)))
        sql = next(q["sql"] for q in queries.captured_queries if not q["sql"].startswith("EXPLAIN"))
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN " + sql)
            plan = "\n".join(row[0] for row in cursor.fetchall())
        assert "content_search_vector_idx" in plan and "Seq Scan" not in plan, plan


@pytest.mark.django_db
def test_the_reported_as_filter_is_served_by_the_kind_and_review_index(api_client):
    review = submitted(api_client, text="dasar bodoh", external_id="a")
    services.report_file(review_id=review.pk, reporter_id="n-1", reason="harassment", kind=ReportKind.DSA_NOTICE)
    narrowed = filtered_reviews(ContentReview.objects.all(), {"report_kind": ReportKind.DSA_NOTICE})
    assert set(narrowed.values_list("pk", flat=True)) == {review.pk}
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
    assert "report_kind_review_idx" in narrowed.order_by("-created_at")[:50].explain()
    assert Content.objects.filter(pk=review.content_id).exists()


@pytest.mark.django_db
def test_the_lists_queue_filter_offers_the_known_queues_without_reading_the_reviews(moderator, api_client):
    ModerationQueue.objects.create(slug="reports-id", name="Indonesian reports")
    queued = submitted(api_client, text="dasar bodoh", external_id="a")
    other = submitted(api_client, text="you idiot", external_id="b")
    ContentReview.objects.filter(pk=queued.pk).update(queue="reports-id")
    ContentReview.objects.filter(pk=other.pk).update(queue="low_confidence")
    with CaptureQueriesContext(connection) as queries:
        html = moderator.get(LIST, {"queue__exact": "reports-id"}).content.decode()
    assert listed(html) == {queued.short_id}
    assert "Indonesian reports" in html and ReviewQueue.LOW_CONFIDENCE.label in html
    assert not [q["sql"] for q in queries.captured_queries if "DISTINCT" in q["sql"] and '"queue"' in q["sql"]]
