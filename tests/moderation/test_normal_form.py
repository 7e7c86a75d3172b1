"""One normal form that every judge reads (moderation.text.normal; docs/design.md, "The normal
form"): disguises are undone for the rules, the model and the language detector, benign text in
any script gains no match, and every span found in the normal form points at the original's
characters."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from moderation.models import ModerationPolicy, ReviewStatus
from moderation.providers import ModerationInput, get_provider
from moderation.services.policy import DEFAULT_POLICY
from moderation.templatetags.moderation_rules import highlight_terms
from moderation.text.default_terms import default_term_lists
from moderation.text.language import Detection
from moderation.text.matching import TermMatcher
from moderation.text.normal import PASSES_FOR, READINGS_UP_TO, normal_text, normalize
from moderation.text.rules import rule_matches
from moderation.verdicts import decide, match_record

UNSURE = Detection("", ())
SEVERITY = {ReviewStatus.APPROVED: 0, ReviewStatus.MANUAL_REVIEW: 1, ReviewStatus.REJECTED: 2}
ZWSP = "\u200b"

# The issue's twelve disguises, and the plain word a rule names.
DISGUISES = [
    ("id\u200biot", "idiot"),
    ("f\u200bu\u200bc\u200bk you", "fuck"),
    ("f.u.c.k you", "fuck"),
    ("f u c k you", "fuck"),
    ("fuuuuuck you", "fuck"),
    ("\u0456diot", "idiot"),           # a Cyrillic і
    ("idi\u043et", "idiot"),           # a Cyrillic о
    ("ｆｕｃｋ you", "fuck"),          # full-width
    ("kamu b0d0h", "bodoh"),
    ("dasar t0l0l", "tolol"),
    ("I will k1ll you", "kill"),
    ("kamu b\u200bodoh", "bodoh"),
]


def policy(terms: list[str], action: str = "reject", **fields) -> ModerationPolicy:
    return ModerationPolicy(version=1, **{**DEFAULT_POLICY, "term_lists": [
        {"category": "insult", "action": action, "language": "", "terms": terms}], **fields})


def local_result(text: str):
    return get_provider("local").moderate(ModerationInput(idempotency_key="k", content_type="text", text=text))


def verdict(rules: ModerationPolicy, text: str):
    return decide(rules, local_result(text), text=text, detection=UNSURE)


@pytest.mark.parametrize(("text", "word"), DISGUISES)
def test_each_disguise_of_the_issue_is_caught_by_a_rule_for_the_plain_word(text, word):
    found = rule_matches(policy([word]), text, UNSURE)
    assert [m.term for m in found] == [word]
    assert verdict(policy([word]), text).label == ReviewStatus.REJECTED


# Each disguise's plain text: what the model should read.
PLAIN = {"idiot": "idiot", "fuck": "fuck you", "kill": "I will kill you", "bodoh": "kamu bodoh", "tolol": "dasar tolol"}


@pytest.mark.parametrize(("text", "word"), DISGUISES)
def test_the_local_model_reads_each_disguise_as_the_words_it_imitates(text, word):
    # Without the normal form each of these scored as a text the model knows no word of.
    plain = PLAIN[word]
    assert local_result(text).category_scores == local_result(plain).category_scores
    no_rules = ModerationPolicy(version=1, **DEFAULT_POLICY)
    assert verdict(no_rules, text).label == ReviewStatus.REJECTED


def test_the_parts_the_model_scores_point_at_the_original_characters():
    kind = "Our garden\u200b club meets on Saturday and we share seeds and tools with every neighbour. "
    insult = "You are a f.u.c.k.i.n.g \u0456diot."
    text = kind * 6 + insult + " " + kind * 6
    result = local_result(text)
    worst = max(result.parts, key=lambda p: p.scores["insult"])
    rejected_from = DEFAULT_POLICY["category_thresholds"]["insult"]["reject"]
    assert text[worst.start:worst.end] == insult and worst.scores["insult"] >= rejected_from


def test_the_language_of_an_insult_dressed_in_cyrillic_look_alikes_is_read_through_them():
    from moderation.text.language import detect

    text = "y\u043eu \u0430r\u0435 \u0430 stup\u0456d \u0456d\u0456\u043et \u0430nd \u0435v\u0435ry\u043en\u0435 h\u0430t\u0435s y\u043eu"
    assert detect(text).language == "en"


def test_the_span_of_a_disguised_match_is_the_original_one():
    text = "kamu b\u200bodoh, f.u.c.k you"
    found = rule_matches(policy(["bodoh", "fuck"]), text, UNSURE)
    assert [m.matched for m in found] == ["b\u200bodoh", "f.u.c.k"]


def test_the_admin_highlights_the_original_characters_of_a_disguised_match():
    text = "you id\u200biot"
    matches = [match_record(m) for m in rule_matches(policy(["idiot"]), text, UNSURE)]
    html = highlight_terms(text, matches)
    marked = re.search(r'<mark class="rule-match rule-reject"[^>]*>(.*?)</mark>', html).group(1)
    assert marked == 'id<span class="hidden-char hidden-invisible" title="U+200B ZERO WIDTH SPACE">⟨U+200B⟩</span>iot'
    assert html.startswith("you <mark")


# --- no new false matches ---------------------------------------------------------------------

TERMS = ["ass", "tit", "sex", "cum", "hell", "shit", "cunt", "dick", "cock", "anal", "rape", "kill", "fuck", "idiot",
         "tai", "asu", "babi", "bodoh", "tolol", "anjing", "rapist", "сука", "μαλάκας"]
# Real words that hold a term, in English and Indonesian: "pantai" (beach), "santai" (relaxed),
# "asuransi" (insurance), "masuk" (to enter), "pasukan" (troops), "babinsa" (a village's
# non-commissioned officer).
SCUNTHORPE = ["Scunthorpe", "assassin", "classic", "Dickens", "cocktail", "Sussex", "shitake", "analysis",
              "grapefruit", "hello", "cumulative", "titular", "skilled", "pantai", "santai", "asuransi", "masuk",
              "pasukan", "babinsa", "Essex", "passage", "bass", "cockpit", "therapist", "Asus"]
# Benign sentences in sixteen languages and eleven scripts, with what the normal form touches:
# capitals, digits, ordinals and units, repeated letters, single letters, accents, joiners.
BENIGN = [
    "The 4th meeting starts at 10am; bring 2 pens, a USB-C cable and the 1080p screenshots.",
    "I saw a cat. Is it O.K. to feed it? Yes, e.g. with rice. The classic Scunthorpe assassin story, by Dickens.",
    "Pantai di Bali sangat indah, kami santai di sana dan masuk ke laut. Asuransi perjalanan 3rb per hari.",
    "Die Schifffahrt auf der Donau beginnt um 9 Uhr; Straße und Maßstab sind nicht das Problem.",
    "Le garçon a mangé une crème brûlée à Noël, c'est très bien.",
    "Tôi đi học ở Hà Nội, và bạn có khỏe không? Chúng tôi ăn phở mỗi sáng.",
    "Привет, как дела? Сегодня хорошая погода, и мы идём в парк.",
    "Καλημέρα, τι κάνεις; Ο καιρός είναι ωραίος σήμερα στην Αθήνα.",
    "مرحبا، كيف حالك؟ الطقس جميل اليوم ونحن ذاهبون إلى الحديقة.",
    "שלום, מה שלומך? מזג האוויר יפה היום ואנחנו הולכים לפארק.",
    "नमस्ते, आप कैसे हैं? आज मौसम अच्छा है और हम पार्क जा रहे हैं। क्‍ष",
    "สวัสดีครับ วันนี้อากาศดีมาก เราจะไปสวนสาธารณะกัน 555",
    "你好，今天天气很好，我们去公园散步吧。哈哈哈",
    "こんにちは、今日はいい天気ですね。公園に行きましょう。iPhone用",
    "안녕하세요, 오늘 날씨가 좋네요. 공원에 갑시다. ㅋㅋㅋ",
    "გამარჯობა, როგორ ხარ? დღეს კარგი ამინდია.",
    "Բարեւ, ինչպես ես? Այսօր եղանակը լավ է.",
    "سلام، من می\u200cخواهم به پارک بروم.",
    "Love it 👩\u200d💻 ❤️ 1️⃣ 🏳️\u200d🌈 sooo good, coool!!!",
]


@pytest.mark.parametrize("word", SCUNTHORPE)
def test_a_word_that_merely_holds_a_term_matches_nothing(word):
    assert any(term in word.lower() for term in TERMS if term.isascii()), word  # else the test proves nothing
    assert TermMatcher(TERMS).find(f"the {word} here") == []


def test_benign_text_in_sixteen_languages_matches_no_term():
    hits = {text: TermMatcher(TERMS).find(text) for text in BENIGN}
    false_positives = {text: [TERMS[h.term] for h in found] for text, found in hits.items() if found}
    assert false_positives == {}  # a false-positive rate of 0 of len(BENIGN)


def test_benign_text_is_not_flagged_by_the_model_reading_the_normal_form():
    # Every category, each against its own review threshold in the initial policy.
    review_at = {c: levels["review"] for c, levels in DEFAULT_POLICY["category_thresholds"].items()}
    over = {text: {c: s for c, s in local_result(text).category_scores.items() if s >= review_at[c]} for text in BENIGN}
    assert {text: found for text, found in over.items() if found} == {}


@pytest.mark.parametrize("text", BENIGN[6:])
def test_a_word_of_one_alphabet_is_left_as_it_is_written(text):
    """Beyond case and NFKC, the normal form changes no letter of text in one alphabet per word."""
    plain = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    assert re.sub(r"(\w)\1+", r"\1", normal_text(text)) == re.sub(r"(\w)\1+", r"\1", plain)


@pytest.mark.parametrize(("text", "normal"), [
    ("Привет пpивет", "привет привет"),                          # a Latin p in a Russian word reads Cyrillic
    ("сука", "сука"), ("ΑΒΓ", "αβγ"),                             # one alphabet: left alone
    ("4th 10am 5g 45s 1488 3rb 1.5", "4th 10am 5g 45s 1488 3rb 1.5"),  # numbers stay numbers
    ("4ss 5h1t a$$ @ss h3ll0", "ass shit ass ass hello"),
    ("I a m", "iam"), ("e.g. a b", "e.g. a b"), ("1 2 3", "1 2 3"),
    ("i d i o t i.d.i.o.t", "idiot idiot"), ("i.d.i.o.t i d i o t", "idiot idiot"),  # a space binds less
    ("\u0440r\u043e\u0441\u0435ss", "process"),  # Latin and Cyrillic can both spell it: Latin
    ("\u202eesrever", "esrever"), ("👩\u200d💻", "👩\u200d💻"), ("می\u200cخواهم", "می\u200cخواهم"),
    ("Straße", "strasse"), ("ﬁx", "fix"),
])
def test_the_normal_form_of(text, normal):
    assert normal_text(text) == normal


def test_each_alphabet_the_table_folds_into_is_one_the_mixed_script_marker_knows():
    from moderation.text.visible import letter_script

    assert {letter_script(c) for c in PASSES_FOR} == {"Cyrillic", "Greek", "Armenian", "Cherokee"}
    assert PASSES_FOR["\u0456"] == "i" and PASSES_FOR["\u043a"] == "k" and PASSES_FOR["β"] == "b"


# --- disguises never make a verdict more lenient ---------------------------------------------------

WORDS = ["idiot", "fuck", "bodoh", "tolol", "kill", "stupid", "shit", "you", "are", "the", "process", "kamu",
         "dasar", "hello", "friend", "morning", "jerk", "sekali", "with", "love"]
RULES = ModerationPolicy(version=1, **{**DEFAULT_POLICY, "term_lists": [
    {"category": "insult", "action": "reject", "language": "", "terms": ["idiot", "fuck", "bodoh", "tolol", "kill", "shit"]},
    {"category": "insult", "action": "manual_review", "language": "", "terms": ["stupid", "jerk"]},
    {"category": "insult", "action": "allow", "language": "", "terms": ["kill the process"]},
]})
HIDDEN = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u202e", "\u202d", "\u2066", "\u2069", "\u180e"]
LOOK_ALIKES = {"a": "аα", "c": "с", "e": "е", "i": "іι", "o": "оο", "p": "р", "s": "ѕ", "x": "х", "y": "у", "j": "ј"}
LEET_FOR = {"a": "4@", "e": "3", "i": "1", "o": "0", "s": "5$", "t": "7", "b": "8", "g": "9"}
SEPARATORS = [" ", ".", "-", "_", "*"]


@st.composite
def disguised(draw, word: str, spaced_before: str | None) -> tuple[str, str | None]:
    """`word` with some disguises applied (in the order a writer would), and the separator it was
    spelt apart with (None: not spelt apart)."""
    letters = list(word)
    if draw(st.booleans()):  # leetspeak: a digit after the first letter, or @ and $ anywhere
        for i, c in enumerate(letters):
            options = [s for s in LEET_FOR.get(c, "") if i or not s.isdigit()]
            if options and draw(st.booleans()):
                letters[i] = draw(st.sampled_from(options))
    if draw(st.booleans()):  # look-alikes of another alphabet, at least one Latin letter left
        swappable = [i for i, c in enumerate(letters) if c in LOOK_ALIKES]
        chosen = draw(st.lists(st.sampled_from(swappable), unique=True, max_size=len(word) - 1)) if swappable else []
        for i in chosen:
            letters[i] = draw(st.sampled_from(LOOK_ALIKES[letters[i]]))
    if draw(st.booleans()):  # a letter written 3 to 6 times, where the word has it once
        single = [i for i, c in enumerate(word) if word.count(c * 2) == 0 and c.isalpha()]
        if single:
            i = draw(st.sampled_from(single))
            letters[i] = letters[i] * draw(st.integers(3, 6))
    separator = None
    if draw(st.booleans()):  # spelt apart (one-letter runs only: a repeated letter stays whole)
        choices = [s for s in SEPARATORS if s != spaced_before]
        separator = draw(st.sampled_from(choices))
        if any(len(piece) > 1 for piece in letters):
            separator = None
        else:
            letters = [separator.join(letters)]
    text = "".join(letters)
    if draw(st.booleans()):  # hidden characters anywhere inside
        for _ in range(draw(st.integers(1, 3))):
            at = draw(st.integers(0, len(text)))
            text = text[:at] + draw(st.sampled_from(HIDDEN)) + text[at:]
    case = draw(st.sampled_from(["as is", "upper", "title", "full-width"]))
    if case == "upper":
        text = text.upper()
    elif case == "title":
        text = text.title()
    elif case == "full-width":
        text = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)
    return text, separator


@st.composite
def plain_and_disguised(draw, vocabulary: list[str] = WORDS) -> tuple[str, str]:
    words = draw(st.lists(st.sampled_from(vocabulary), min_size=1, max_size=6))
    pieces, spaced = [], None
    for word in words:
        piece, spaced = draw(disguised(word, spaced))
        pieces.append(piece)
    return " ".join(words), " ".join(pieces)


PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(pair=plain_and_disguised())
@example(pair=("kill the process", "k.1.l.l th3 pr\u043ec\u0435ss"))
@example(pair=("you idiot", "y o u id\u200b\u0456\u043e\u043e\u043et"))
def test_a_disguised_text_is_read_as_the_plain_text(pair):
    plain, text = pair
    assert normal_text(text) == normal_text(plain), (plain, text, normal_text(text))
    assert sorted(WORDS[hit.term] for hit in TermMatcher(WORDS).find(text)) == sorted(plain.split()), (plain, text)


# One-letter words ("I", "a", "u") beside the words: before or after letters spelt apart with
# spaces, they cannot be told from the run's end letters ("I k i l l you": moderation.text.normal,
# step 3), which the leniency properties below must survive.
ONE_LETTER_WORDS = ["a", "i", "u"]


@PROPERTY
@given(pair=plain_and_disguised(WORDS + ONE_LETTER_WORDS))
@example(pair=("i kill you", "I k i l l you"))
@example(pair=("what a shit", "what a s h i t"))
@example(pair=("fuck u", "f u c k u"))
def test_a_disguised_text_is_never_judged_more_leniently_than_the_plain_text(pair):
    plain, text = pair
    assert SEVERITY[verdict(RULES, text).label] >= SEVERITY[verdict(RULES, plain).label], (plain, text)


# The default term lists (moderation/data/terms) with the same disguises: their one-word terms
# (letters only) among everyday words.
DEFAULT_RULES = ModerationPolicy(version=1, **{**DEFAULT_POLICY, "term_lists": default_term_lists(("en", "id", "ms"))})
DEFAULT_WORDS = sorted({t for rule in DEFAULT_RULES.term_lists for t in rule["terms"] if t.isascii() and t.isalpha()})


@PROPERTY
@given(pair=plain_and_disguised(DEFAULT_WORDS + WORDS + ONE_LETTER_WORDS))
@example(pair=("dasar tolol kamu", "dasar t0l0l kamu"))
@example(pair=("a bangsat", "a b a n g s a t"))
@example(pair=("what a dick", "what a d i c k"))
@example(pair=("you motherfucker", "y o u m​отherfuuucker"))
def test_a_disguised_text_is_never_judged_more_leniently_than_the_plain_text_by_the_default_lists(pair):
    plain, text = pair
    assert SEVERITY[verdict(DEFAULT_RULES, text).label] >= SEVERITY[verdict(DEFAULT_RULES, plain).label], (plain, text)


def test_letters_spelt_apart_after_a_one_letter_word_are_also_read_with_it_apart():
    normal = normalize("I k i l l you")

    assert normal.text == "ikill you"
    assert [reading.text for reading in normal.readings] == ["i kill you", "ikil l you", "i kil l you"]
    kept_apart = normal.readings[0]
    assert "I k i l l you"[slice(*kept_apart.original_span(2, 6))] == "k i l l"
    # Found at the original's span whichever reading holds the term; the plain one is found as before.
    assert [("I k i l l you"[h.start:h.end]) for h in TermMatcher(["kill"]).find("I k i l l you")] == ["k i l l"]
    assert local_result("I k i l l you").category_scores == {
        c: max(local_result(text).category_scores[c] for text in ("ikill you", "i kill you", "ikil l you", "i kil l you"))
        for c in local_result("i kill you").category_scores}


def test_runs_too_short_to_lose_a_letter_and_long_texts_get_no_other_reading():
    assert normalize("a s s").readings == () and normalize("f.u.c.k you").readings == ()
    long_text = "I k i l l you " + "x" * READINGS_UP_TO
    assert normalize(long_text).readings == () and normalize(long_text).text.startswith("ikill you")


# --- offsets ---------------------------------------------------------------------------------------

ANY_CHAR = st.characters(exclude_categories=("Cs",), exclude_characters="\x00")
PIECES = ["f.u.c.k", "f u c k", "fuuuuck", "b0d0h", "4th", "\u0456d\u0456ot", "ｆｕｃｋ", "e\u0301", "ﬁ", "ß", "İ",
          "\u200b", "\u200d", "👩\u200d💻", "\u202e", "\u0301", " ", ".", "$", "@", "1", "ооо", "kіll"]
TEXTS = st.lists(st.one_of(st.sampled_from(PIECES), st.text(ANY_CHAR, max_size=4)), max_size=20).map("".join)


@settings(max_examples=400, deadline=None)
@given(text=TEXTS | st.text(ANY_CHAR, max_size=60), data=st.data())
def test_every_span_of_the_normal_form_maps_to_a_span_of_the_original_covering_its_characters(text, data):
    normal = normalize(text)
    size = len(normal.text)
    assert len(normal.origin) == len(normal.origin_end) == size and normal.length == len(text)
    assert all(0 <= a < b <= len(text) for a, b in zip(normal.origin, normal.origin_end, strict=True))
    assert list(normal.origin) == sorted(normal.origin) and list(normal.origin_end) == sorted(normal.origin_end)
    assert all(i < size for i in normal.repeated)
    start = data.draw(st.integers(0, size))
    end = data.draw(st.integers(start, size))
    low, high = normal.original_span(start, end)
    assert 0 <= low <= high <= len(text)
    assert (low == high) == (start == end)
    for i in range(start, end):
        assert low <= normal.origin[i] and normal.origin_end[i] <= high
