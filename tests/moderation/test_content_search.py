"""Content search in the review list and the queues (docs/workplace.md, "Search"): words by the
content's language, `simple` otherwise, substrings by trigram for fragments or when no content has
the words, erased content never found, and any Unicode term answered, never a crash."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.db.models import Q
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from moderation.privacy.erasure import content_erase
from moderation.models import TEXT_SEARCH_CONFIGS, Content, ContentReview
from moderation.observability import search
from moderation.observability.search import (
    SEARCH_MAX_CHARS,
    SearchRule,
    reviews_matching,
    prefix_tsquery,
    text_search_configs,
    words_query,
)
from tests.moderation import test_workplace_pages
from tests.moderation.test_workplace_pages import LIST, QUEUES, submitted
from tests.helpers import examples

moderator = test_workplace_pages.moderator  # a fixture: a logged-in moderator's test client

ROW = re.compile(r'id="(?:queue-item-)?([0-9a-f]{8})"|class="review-link">([0-9a-f]{8})<')


def in_language(review: ContentReview, code: str) -> ContentReview:
    """Set the detector's answer, as dispatch stores it (services.policy.content_language)."""
    Content.objects.filter(pk=review.content_id).update(language=code, language_candidates=[[code, 0.9]])
    return review


def found(reviews, term: str) -> set:
    matched, _ = reviews_matching(ContentReview.objects.all(), term)
    return set(matched.values_list("pk", flat=True)) & {r.pk for r in reviews}


def rule(term: str) -> SearchRule | None:
    return reviews_matching(ContentReview.objects.all(), term)[1]


def listed(html: str) -> set[str]:
    return {a or b for a, b in ROW.findall(html)}


@pytest.mark.django_db
class TestWords:
    def test_every_mapped_configuration_exists_on_the_server(self):
        with connection.cursor() as cursor:
            cursor.execute("SELECT cfgname FROM pg_ts_config")
            names = {row[0] for row in cursor.fetchall()}
        assert set(TEXT_SEARCH_CONFIGS.values()) | {"simple"} <= names

    def test_the_stored_words_follow_the_language_english_indonesian_else_simple(self, api_client):
        english = in_language(submitted(api_client, text="they were running idiots", external_id="en"), "en")
        indonesian = in_language(submitted(api_client, text="kamu membodohi mereka", external_id="id"), "id")
        unsure = in_language(submitted(api_client, text="they were running idiots", external_id="un"), "")
        vectors = dict(Content.objects.filter(review__in=[english, indonesian, unsure])
                       .values_list("external_id", "search_vector"))
        assert vectors["en"] == "'idiot':4 'run':3"  # stemmed, "they" and "were" are stop words
        assert vectors["id"] == "'bodoh':2 'kamu':1 'reka':3"  # the Indonesian stemmer strips mem-/-i
        assert vectors["un"] == "'idiots':4 'running':3 'they':1 'were':2"  # simple: words as written

    def test_a_word_finds_the_indonesian_reviews_containing_it_in_any_form(self, api_client):
        plain = in_language(submitted(api_client, text="dasar kamu bodoh sekali", external_id="a"), "id")
        affixed = in_language(submitted(api_client, text="jangan membodohi saya ya", external_id="b"), "id")
        other = in_language(submitted(api_client, text="selamat pagi semua teman", external_id="c"), "id")
        assert found([plain, affixed, other], "bodoh") == {plain.pk, affixed.pk}
        assert rule("bodoh") == SearchRule.WORDS

    def test_an_english_inflection_finds_the_stem_and_an_unsure_text_is_found_by_its_words_as_written(self, api_client):
        english = in_language(submitted(api_client, text="you are an idiot", external_id="a"), "en")
        unsure = in_language(submitted(api_client, text="idiots everywhere lol", external_id="b"), "")
        assert found([english, unsure], "idiots") == {english.pk, unsure.pk}

    def test_a_word_finds_its_variants_whatever_language_the_text_was_read_in(self, api_client):
        """Issue 49: "insult" missed "insults" and "insulting" in texts whose language was unsure."""
        plural = in_language(submitted(api_client, text="stop these insults now", external_id="a"), "")
        gerund = in_language(submitted(api_client, text="that was insulting", external_id="b"), "")
        english = in_language(submitted(api_client, text="he insulted me twice", external_id="c"), "en")
        other = in_language(submitted(api_client, text="an instant reply", external_id="d"), "")
        everyone = [plural, gerund, english, other]
        assert found(everyone, "insult") == {plural.pk, gerund.pk, english.pk}
        assert found(everyone, "insulting") == {plural.pk, gerund.pk, english.pk}  # stemmed, then a prefix
        assert found(everyone, "Insults") == {plural.pk, gerund.pk, english.pk}
        assert rule("insult") == SearchRule.WORDS

    def test_an_indonesian_word_finds_its_affixed_forms_in_an_unsure_text(self, api_client):
        suffixed = in_language(submitted(api_client, text="pukulan keras sekali", external_id="a"), "")
        indonesian = in_language(submitted(api_client, text="dia dipukul kemarin", external_id="b"), "id")
        other = in_language(submitted(api_client, text="pagi yang cerah", external_id="c"), "")
        assert found([suffixed, indonesian, other], "pukul") == {suffixed.pk, indonesian.pk}
        assert found([suffixed, indonesian, other], "dipukul") == {suffixed.pk, indonesian.pk}

    def test_the_prefix_query_quotes_each_word_and_keeps_web_search_syntax_as_written(self):
        assert prefix_tsquery("insult idiot") == "'insult':* & 'idiot':*"
        assert prefix_tsquery("it's a b:c\\d & | !") is None  # no word of three letters
        assert prefix_tsquery("don't:* insult") == "'don':* & 'insult':*"
        assert prefix_tsquery('"worthless piece"') is None and prefix_tsquery("worthless -junk") is None

    def test_a_phrase_and_an_excluded_word(self, api_client):
        both = in_language(submitted(api_client, text="worthless piece of junk", external_id="a"), "en")
        apart = in_language(submitted(api_client, text="a piece that is worthless", external_id="b"), "en")
        assert found([both, apart], '"worthless piece"') == {both.pk}
        assert found([both, apart], "worthless -junk") == {apart.pk}

    def test_the_term_is_read_with_the_configured_languages_and_simple(self, settings):
        settings.MODERATION_LANGUAGES = ["en", "id", "ms"]
        assert text_search_configs() == ["english", "indonesian", "simple"]
        settings.MODERATION_LANGUAGES = ["en", "xx"]  # a code without a configuration reads as simple
        assert text_search_configs() == ["english", "simple"]


@pytest.mark.django_db
class TestSubstrings:
    def test_a_fragment_of_three_or_four_letters_finds_the_longer_word(self, api_client):
        idiot = in_language(submitted(api_client, text="what an idiot", external_id="a"), "en")
        kind = in_language(submitted(api_client, text="what a kind person", external_id="b"), "en")
        assert found([idiot, kind], "idi") == {idiot.pk}
        assert found([idiot, kind], "IDIO") == {idiot.pk}
        assert rule("idi") == SearchRule.WORDS_AND_SUBSTRING

    def test_a_longer_term_no_content_has_as_a_word_falls_back_to_its_substring(self, api_client):
        glued = in_language(submitted(api_client, text="youareanidiotok", external_id="a"), "en")
        assert found([glued], "anidiot") == {glued.pk}
        assert rule("anidiot") == SearchRule.SUBSTRING_FALLBACK

    def test_a_longer_term_that_some_content_has_as_a_word_is_a_word_search_only(self, api_client):
        word = in_language(submitted(api_client, text="an idiot", external_id="a"), "en")
        glued = in_language(submitted(api_client, text="anidiotic", external_id="b"), "en")
        assert found([word, glued], "idiot") == {word.pk}
        assert rule("idiot") == SearchRule.WORDS

    def test_a_term_of_one_or_two_characters_matches_whole_words_only(self, api_client):
        ok = in_language(submitted(api_client, text="ok fine", external_id="a"), "")
        inside = in_language(submitted(api_client, text="looking good", external_id="b"), "")
        assert found([ok, inside], "ok") == {ok.pk}

    def test_like_wildcards_in_the_term_are_literal(self, api_client):
        percent = in_language(submitted(api_client, text="100% sure", external_id="a"), "")
        other = in_language(submitted(api_client, text="1000 sure", external_id="b"), "")
        assert found([percent, other], "0%") == set()
        assert found([percent, other], "00%") == {percent.pk}

    def test_the_trigram_index_serves_the_substring_lookup_where_the_server_has_pg_trgm(self, api_client):
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'")
            if cursor.fetchone() is None:
                pytest.skip("this PostgreSQL has no pg_trgm (the embedded development server): substrings scan")
            # Enough rows for the planner to prefer an index to a scan (it must, at 1M: bench/search.py).
            cursor.execute("INSERT INTO moderation_content (id, client_id, external_id, kind, text, media_url, metadata,"
                           " created_at) SELECT gen_random_uuid(), %s, 'f' || i, 'text', 'filler text ' || i, '',"
                           " '{}', now() FROM generate_series(1, 20000) AS i", [api_client.pk])
            # What autovacuum does: the rows just inserted move from the GIN's pending list into it.
            cursor.execute("SELECT gin_clean_pending_list('content_text_trigram_idx')")
            cursor.execute("ANALYZE moderation_content")
        plan = Content.objects.filter(text__icontains="anidiot", erased_at__isnull=True).explain()
        assert "content_text_trigram_idx" in plan, plan


@pytest.mark.django_db
class TestIdsAndErasure:
    def test_ids_are_still_found_and_the_word_index_serves_the_words(self, api_client, monkeypatch):
        review = in_language(submitted(api_client, text="nothing to see", external_id="ext-42"), "en")
        assert found([review], review.short_id) == {review.pk}
        assert found([review], "ext-42") == {review.pk}
        with connection.cursor() as cursor:
            # Whether the word index can serve the query, not which plan a one-row table's
            # statistics favour (ANALYZE writes them in place, so they were whatever the tests
            # before this one left: the planner then chose a nested loop over the primary key).
            # With scans and plain index scans off, only a bitmap scan of an index whose
            # condition the query states is left: the word index, if the query can use it.
            cursor.execute("SET enable_seqscan = off")
            cursor.execute("SET enable_indexscan = off")
            cursor.execute("SET enable_nestloop = off")
        # The words are read from the index first (the contents' ids: docs/benchmarks.md), or,
        # when too many, tested through the join by the page query.
        words = Q(search_vector=words_query("nothing"))
        assert "content_search_vector_idx" in Content.objects.filter(words, erased_at__isnull=True).explain()
        matched, _ = reviews_matching(ContentReview.objects.all(), "nothing")
        assert set(matched.values_list("pk", flat=True)) == {review.pk}
        with monkeypatch.context() as patched:
            patched.setattr(search, "MATCHED_IDS_UP_TO", 0)
            matched, _ = reviews_matching(ContentReview.objects.all(), "nothing")
            assert "content_search_vector_idx" in matched.explain()

    def test_erased_content_is_found_neither_by_word_nor_by_substring(self, api_client):
        review = in_language(submitted(api_client, text="kamu bodoh sekali", external_id="a"), "id")
        assert found([review], "bodoh") == {review.pk}
        content_erase(review_id=review.pk, actor="admin", actor_id="ops", reason="user request")
        assert Content.objects.get(pk=review.content_id).search_vector == ""
        assert found([review], "bodoh") == set()
        assert found([review], "bod") == set()
        assert found([review], review.short_id) == {review.pk}  # its ids stay: the audit chain

    def test_a_term_too_long_or_with_a_nul_is_refused_with_a_reason(self, db):
        with pytest.raises(ValueError, match=f"at most {SEARCH_MAX_CHARS}"):
            reviews_matching(ContentReview.objects.all(), "x" * (SEARCH_MAX_CHARS + 1))
        with pytest.raises(ValueError, match="NUL"):
            reviews_matching(ContentReview.objects.all(), "a\x00b")


@pytest.mark.django_db
class TestPages:
    def test_the_list_finds_a_word_of_the_content_and_says_how(self, moderator, api_client):
        hit = in_language(submitted(api_client, text="dasar bodoh", external_id="a"), "id")
        miss = in_language(submitted(api_client, text="selamat pagi", external_id="b"), "id")
        html = moderator.get(LIST, {"q": "bodoh"}).content.decode()
        assert listed(html) == {hit.short_id}
        assert miss.short_id not in html
        assert 'id="search-rule"><small>Searched by words, and ids.' in html

    def test_the_list_refuses_a_too_long_term_with_a_message(self, moderator, api_client):
        submitted(api_client, text="dasar bodoh", external_id="a")
        response = moderator.get(LIST, {"q": "y" * 300}, follow=True)
        html = response.content.decode()
        assert response.status_code == 200
        assert "Not searched: The search is 300 characters long: at most 200 are taken." in html
        assert listed(html) == set()

    def test_the_queue_searches_within_the_chosen_queue(self, moderator, api_client):
        hit = in_language(submitted(api_client, text="dasar bodoh", external_id="a"), "id")
        miss = in_language(submitted(api_client, text="selamat pagi", external_id="b"), "id")
        queue = ContentReview.objects.get(pk=hit.pk).queue
        html = moderator.get(QUEUES, {"queue": queue, "q": "bodoh"}).content.decode()
        assert f'id="queue-item-{hit.short_id}"' in html
        assert f'id="queue-item-{miss.short_id}"' not in html
        assert "(matching the search)" in html
        assert moderator.get(QUEUES, {"queue": queue, "q": "a\x00"}).status_code == 400


FEW = settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
TERMS = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=60)


@pytest.mark.django_db
@FEW
@given(term=TERMS)
@example(term="\u202eesrever")
@example(term="id\u200biot")
@example(term="!!! & | ! ( ) : * '")
@example(term="🔥" * 3)
@example(term="e\u0301\u0301\u0301")
@example(term="\\%_")
@example(term="-")
@example(term='"')
@example(term="insult's:* & 'x' \\ \\' ::")
@example(term="ｉｎｓｕｌｔ ünsült")
def test_any_unicode_term_answers_the_list_and_the_queue(moderator, api_client, term):
    if not ContentReview.objects.exists():
        submitted(api_client, text="dasar bodoh 🔥 idiot \u202eesrever", external_id="seed")
    assert moderator.get(LIST, {"q": term}).status_code == 200
    assert moderator.get(QUEUES, {"q": term}).status_code == 200
