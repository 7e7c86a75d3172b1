"""Finding reviews by any id a moderator or operator may hold, or by the words of their content
(the admin's search box, the queues' search: docs/workplace.md, "Search")."""

from __future__ import annotations

import operator
import re
import uuid
from enum import StrEnum
from functools import reduce

from django.contrib.postgres.search import SearchQuery
from django.db.models import Q

from callbacks.models import ProviderCallback
from moderation.language import configured_languages
from moderation.models import (
    FALLBACK_TEXT_SEARCH_CONFIG,
    SHORT_ID_LENGTH,
    TEXT_SEARCH_CONFIGS,
    Content,
    ContentReview,
    ModerationRequest,
    short_id_expression,
)

_HEX_PREFIX = re.compile(r"^[0-9a-f]{4,31}$")


def review_ids_matching(term: str, limit: int = 200) -> set:
    """Reviews a moderator may mean by `term`: a review id (its short id, as shown in the list, or
    its first characters), a content id, an external id, an idempotency key, a provider request id or a
    provider event id. Each kind is its own indexed lookup; none scans a table."""
    term = term.strip()
    found: set = set()
    try:
        as_uuid = uuid.UUID(term)
    except ValueError:
        as_uuid = None
    if as_uuid:
        found |= set(ContentReview.objects.filter(pk=as_uuid).values_list("pk", flat=True))
        found |= set(ContentReview.objects.filter(content_id=as_uuid).values_list("pk", flat=True))
        found |= set(ModerationRequest.objects.filter(idempotency_key=as_uuid).values_list("review_id", flat=True))
    elif _HEX_PREFIX.match(term.replace("-", "").lower()):
        prefix = term.replace("-", "").lower()
        low, high = uuid.UUID(prefix.ljust(32, "0")), uuid.UUID(prefix.ljust(32, "f"))
        found |= set(ContentReview.objects.filter(pk__gte=low, pk__lte=high).values_list("pk", flat=True)[:limit])
        if len(prefix) == SHORT_ID_LENGTH:
            found |= set(by_short_id(ContentReview.objects, prefix).values_list("pk", flat=True)[:limit])
    found |= set(Content.objects.filter(external_id=term).values_list("review__pk", flat=True)[:limit])
    found |= set(ContentReview.objects.filter(provider_request_id=term).values_list("pk", flat=True)[:limit])
    found |= set(ModerationRequest.objects.filter(provider_request_id=term).values_list("review_id", flat=True)[:limit])
    keys = ProviderCallback.objects.filter(provider_event_id=term).values_list("idempotency_key", flat=True)[:limit]
    found |= set(ModerationRequest.objects.filter(idempotency_key__in=list(keys)).values_list("review_id", flat=True))
    found.discard(None)
    return found


def by_short_id(reviews, short_id: str):
    """The reviews whose short id (`ContentReview.short_id`) is `short_id`: one lookup in its index."""
    return reviews.alias(short_id=short_id_expression()).filter(short_id=short_id.lower())


# --- content search (docs/workplace.md, "Search") -----------------------------------------------

# Trigrams need three characters: a shorter substring gives the index nothing to look up.
SUBSTRING_MIN_CHARS = 3
# A one-word term shorter than this is a fragment as often as a word ("idi" of "idiot"): it is
# looked for as a substring as well as a word, whatever the word search finds.
FRAGMENT_BELOW_CHARS = 5
# Longer terms are refused with a message: nobody types a paragraph to find a review.
SEARCH_MAX_CHARS = 200


class SearchRule(StrEnum):
    """How a term was looked for, for the page to say so."""

    WORDS = "words"
    WORDS_AND_SUBSTRING = "words and substring"
    SUBSTRING_FALLBACK = "substring (no content has these words)"


def text_search_configs() -> list[str]:
    """The configurations a search term is read with: those of the languages the detector tells
    apart (its words are stored with them), and `simple` (unsure or other languages)."""
    return sorted({TEXT_SEARCH_CONFIGS.get(code, FALLBACK_TEXT_SEARCH_CONFIG) for code in configured_languages()}
                  | {FALLBACK_TEXT_SEARCH_CONFIG})


def words_query(term: str) -> SearchQuery:
    """`term` as a web search (words, "quoted phrases", -excluded) under each configuration,
    combined with OR: a content matches when its words, as its own language's stemmer read them,
    match the term as that stemmer reads it."""
    queries = [SearchQuery(term, search_type="websearch", config=config) for config in text_search_configs()]
    return reduce(operator.or_, queries)


def content_matches(reviews, term: str) -> tuple[Q, SearchRule]:
    """The condition on `reviews` (a ContentReview queryset, filtered already) for the reviews
    whose content matches `term`, and the rule it used:
    - words: full-text search, stemmed by language (`words_query`);
    - and substrings (`__icontains` on the trigram index) when the term is one word of
      SUBSTRING_MIN_CHARS to FRAGMENT_BELOW_CHARS - 1 characters, or when no review among
      `reviews` has the words (one indexed EXISTS).
    Erased content never matches: erasure blanks the text, so its words go with it (the column
    is generated), and the condition says so as well."""
    words = Q(content__search_vector=words_query(term))
    substring = Q(content__text__icontains=term)
    live = Q(content__erased_at__isnull=True)
    if len(term) < SUBSTRING_MIN_CHARS:
        return words & live, SearchRule.WORDS
    if len(term) < FRAGMENT_BELOW_CHARS and not any(ch.isspace() for ch in term):
        return (words | substring) & live, SearchRule.WORDS_AND_SUBSTRING
    if any_content_has_words(term) and reviews.filter(words & live).exists():
        return words & live, SearchRule.WORDS
    return substring & live, SearchRule.SUBSTRING_FALLBACK


def any_content_has_words(term: str) -> bool:
    """Whether any content at all has the words of `term`, asked of the GIN index on
    `search_vector`: a count with no LIMIT, so the planner reads the index's matches (a bitmap)
    rather than scanning the contents for a first row, as it plans an EXISTS or a LIMIT 1 of a
    term it expects to be frequent enough (docs/benchmarks.md, "Content search at 1M reviews").
    A term no content has costs one index probe. Erased content has no words (its column is
    blanked with its text), so it need not be excluded here."""
    return Content.objects.filter(search_vector=words_query(term)).count() > 0


def reviews_matching(reviews, term: str) -> tuple[object, SearchRule | None]:
    """`reviews` narrowed to those `term` names by an id (`review_ids_matching`) or whose content
    matches it (`content_matches`). The term is stripped; an empty one narrows nothing.
    Raises ValueError (with a message for the moderator) for a term too long or with a NUL."""
    term = term.strip()
    if not term:
        return reviews, None
    if len(term) > SEARCH_MAX_CHARS:
        raise ValueError(f"The search is {len(term)} characters long: at most {SEARCH_MAX_CHARS} are taken.")
    if "\x00" in term:  # PostgreSQL text cannot hold it
        raise ValueError("The search contains a NUL character.")
    matches, rule = content_matches(reviews, term)
    ids = review_ids_matching(term)
    return reviews.filter(matches | Q(pk__in=ids) if ids else matches), rule
