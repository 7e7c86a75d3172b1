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
from moderation.text.language import configured_languages
from moderation.selectors import estimated_rows
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


# A word of the term this long or longer is looked for as a prefix too: "insult" finds "insults"
# and "insulting" in a text whose language was unsure (read with `simple`, so unstemmed). A
# shorter one would match too much to help ("in" of every "in...").
PREFIX_MIN_CHARS = SUBSTRING_MIN_CHARS
# Letters and digits: what the term's words are made of for the prefix query (quotes, colons,
# backslashes and operators never reach it, so any Unicode the moderator types is safe).
_WORD = re.compile(r"[^\W_]+")
# A web search with these is taken as written: an excluded word or a phrase has no prefix form.
_WEBSEARCH_SYNTAX = re.compile(r'"|(?:^|\s)-|\bor\b', re.IGNORECASE)


def prefix_tsquery(term: str) -> str | None:
    """`term`'s words, each as a prefix, all required: to_tsquery's input ("'insult':* &
    'idiot':*"), None when it has no word long enough or uses web search syntax. Each word is
    quoted, so it is read as a lexeme and nothing in it as an operator."""
    if _WEBSEARCH_SYNTAX.search(term):
        return None
    words = [word for word in _WORD.findall(term) if len(word) >= PREFIX_MIN_CHARS]
    if not words:
        return None
    return " & ".join(f"'{word}':*" for word in words)


def words_query(term: str) -> SearchQuery:
    """`term` as a web search (words, "quoted phrases", -excluded) under each configuration,
    combined with OR: a content matches when its words, as its own language's stemmer read them,
    match the term as that stemmer reads it. And its words as prefixes (`prefix_tsquery`), each
    stemmed by each configuration first, so word variants match whatever the language a content
    was read in: "insult" finds "insults" and "insulting", "insulting" finds "insults", and the
    Indonesian stemmer takes "dipukul" to "pukul", which finds "pukulan". The GIN index answers
    prefix queries as it does words."""
    configs = text_search_configs()
    queries = [SearchQuery(term, search_type="websearch", config=config) for config in configs]
    prefixes = prefix_tsquery(term)
    if prefixes is not None:
        queries += [SearchQuery(prefixes, search_type="raw", config=config) for config in configs]
    return reduce(operator.or_, queries)


# A search whose contents number at most this many (the planner's estimate, then the index's
# answer) narrows the reviews by those contents' ids, read from the GIN index first; more, and
# the condition is left to the page query, whose walk of the list's or queue's order fills a
# page fast when matches are that common (docs/benchmarks.md, "Content search at 1M reviews").
MATCHED_IDS_UP_TO = 20_000


def matching_content_ids(condition: Q) -> list | None:
    """The ids of the live contents matching `condition` (on Content), when there are at most
    MATCHED_IDS_UP_TO of them; None when the planner expects more, or there are more. Asked
    with no LIMIT the planner could take for a promise of an early end: the estimate is checked
    first, so the LIMIT (one more than allowed) never cuts a read short, and the planner reads the
    matches from the GIN indexes (a bitmap) rather than scanning the contents for them."""
    contents = Content.objects.filter(condition, erased_at__isnull=True)
    estimate = estimated_rows(contents)
    if estimate is None or estimate > MATCHED_IDS_UP_TO:
        return None
    ids = list(contents.values_list("pk", flat=True)[:MATCHED_IDS_UP_TO + 1])
    return ids if len(ids) <= MATCHED_IDS_UP_TO else None


def _on_reviews(condition: Q, term_ids: list | None) -> Q:
    """`condition` (on Content) as a condition on reviews: their content among `term_ids` when
    they were read, else the condition itself through the join, erased content excluded."""
    if term_ids is not None:
        return Q(content_id__in=term_ids)
    return _through_content(condition) & Q(content__erased_at__isnull=True)


def _through_content(condition: Q) -> Q:
    """`condition` on Content, each lookup prefixed with `content__`."""
    joined = Q(_connector=condition.connector, _negated=condition.negated)
    joined.children = [_through_content(child) if isinstance(child, Q) else (f"content__{child[0]}", child[1])
                       for child in condition.children]
    return joined


def content_matches(reviews, term: str) -> tuple[Q, SearchRule]:
    """The condition on `reviews` (a ContentReview queryset, filtered already) for the reviews
    whose content matches `term`, and the rule it used:
    - words: full-text search, stemmed by language (`words_query`);
    - and substrings (`__icontains` on the trigram index) when the term is one word of
      SUBSTRING_MIN_CHARS to FRAGMENT_BELOW_CHARS - 1 characters, or when no review among
      `reviews` has the words.
    The matching contents are read from their indexes first when few enough
    (`matching_content_ids`); the answer is the same either way.
    Erased content never matches: erasure blanks the text, so its words go with it (the column
    is generated), and the condition says so as well."""
    words = Q(search_vector=words_query(term))
    substring = Q(text__icontains=term)
    if len(term) < SUBSTRING_MIN_CHARS:
        return _on_reviews(words, matching_content_ids(words)), SearchRule.WORDS
    if len(term) < FRAGMENT_BELOW_CHARS and not any(ch.isspace() for ch in term):
        # No id read: the trigram side of it rechecks every text holding the fragment's
        # trigrams, slower than the page's walk, which such common matches fill fast
        # (docs/benchmarks.md, "Content search at 1M reviews").
        return _on_reviews(words | substring, None), SearchRule.WORDS_AND_SUBSTRING
    word_ids = matching_content_ids(words)
    if word_ids != [] and reviews.filter(_on_reviews(words, word_ids)).exists():
        return _on_reviews(words, word_ids), SearchRule.WORDS
    return _on_reviews(substring, matching_content_ids(substring)), SearchRule.SUBSTRING_FALLBACK


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
