"""The query shapes that keep content search within its budget at 1M reviews
(docs/benchmarks.md, "Content search at 1M reviews"): the fallback's "does any content have
these words?" asked of the GIN index, and the "reported as" filter served by its index."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from moderation import services
from moderation.admin.filters import filtered_reviews
from moderation.erasure import content_erase
from moderation.models import Content, ContentReview, ReportKind
from moderation.observability.search import SearchRule, any_content_has_words, content_matches
from tests.moderation.test_content_search import found, in_language
from tests.moderation.test_workplace_pages import submitted


def _filler_contents(client_pk: int, n: int = 20000) -> None:
    """Enough contents for the planner to weigh an index against a scan, as it does at 1M."""
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO moderation_content (id, client_id, external_id, kind, text, media_url, metadata,"
                       " created_at) SELECT gen_random_uuid(), %s, 'f' || i, 'text', 'filler text w' || i, '',"
                       " '{}', now() FROM generate_series(1, %s) AS i", [client_pk, n])
        # What autovacuum does: the rows just inserted move from the GIN's pending list into it.
        cursor.execute("SELECT gin_clean_pending_list('content_search_vector_idx')")
        cursor.execute("ANALYZE moderation_content")


@pytest.mark.django_db
class TestTheWordsCheck:
    def test_it_says_whether_any_content_has_the_words_and_erased_content_has_none(self, api_client):
        review = in_language(submitted(api_client, text="kamu bodoh sekali", external_id="a"), "id")
        assert any_content_has_words("bodoh")
        assert any_content_has_words("membodohi")  # the Indonesian stemmer reads it as bodoh
        assert not any_content_has_words("anidiot")
        content_erase(review_id=review.pk, actor="admin", actor_id="ops", reason="user request")
        assert not any_content_has_words("bodoh")

    def test_a_term_no_content_has_skips_the_scoped_check_and_falls_back(self, api_client):
        glued = in_language(submitted(api_client, text="youareanidiotok", external_id="a"), "en")
        with CaptureQueriesContext(connection) as queries:
            _, rule = content_matches(ContentReview.objects.all(), "anidiot")
        assert rule == SearchRule.SUBSTRING_FALLBACK
        statements = [q["sql"] for q in queries.captured_queries]
        assert len(statements) == 1, statements  # the index's answer alone: no EXISTS over the reviews
        assert "LIMIT" not in statements[0] and "@@" in statements[0], statements
        assert found([glued], "anidiot") == {glued.pk}

    def test_words_some_review_of_the_scope_has_are_a_word_search(self, api_client):
        word = in_language(submitted(api_client, text="an idiot", external_id="a"), "en")
        other = in_language(submitted(api_client, text="anidiotic", external_id="b"), "en")
        assert content_matches(ContentReview.objects.all(), "idiot")[1] == SearchRule.WORDS
        # Some content has the word, but none of the reviews searched: substrings, as before.
        scope = ContentReview.objects.filter(pk=other.pk)
        assert content_matches(scope, "idiot")[1] == SearchRule.SUBSTRING_FALLBACK
        assert word.pk not in set(scope.values_list("pk", flat=True))

    def test_the_planner_answers_it_from_the_gin_index_not_a_scan(self, api_client):
        in_language(submitted(api_client, text="youareanidiotok", external_id="a"), "en")
        _filler_contents(api_client.pk)
        with CaptureQueriesContext(connection) as queries:
            any_content_has_words("anidiot")
        sql = queries.captured_queries[0]["sql"]
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN " + sql)
            plan = "\n".join(row[0] for row in cursor.fetchall())
        assert "content_search_vector_idx" in plan and "Seq Scan" not in plan, plan


@pytest.mark.django_db
def test_the_reported_as_filter_is_served_by_the_kind_and_review_index(api_client):
    review = submitted(api_client, text="dasar bodoh", external_id="a")
    services.report_file(review_id=review.pk, reporter_id="n-1", reason="harassment", kind=ReportKind.DSA_NOTICE)
    params = {"report_kind": ReportKind.DSA_NOTICE}
    narrowed = filtered_reviews(ContentReview.objects.all(), params)
    assert set(narrowed.values_list("pk", flat=True)) == {review.pk}
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
    assert "report_kind_review_idx" in narrowed.order_by("-created_at")[:50].explain()
    assert Content.objects.filter(pk=review.content_id).exists()
