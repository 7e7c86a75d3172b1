"""The default term lists (moderation/data/terms; docs/policy-rules.md, "Default term lists"):
every shipped term is caught through each evasion, no word that merely holds a term matches,
and a fresh installation's policy holds the lists (an existing one is changed only by a version
its operator publishes)."""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.management import call_command

from lab.term_lists import EMOJI_GAP
from moderation import services
from moderation.models import ModerationPolicy
from moderation.services.policy import DEFAULT_POLICY, policy_ensure_default
from moderation.text.default_terms import default_term_lists, shipped_languages
from moderation.text.language import Detection
from moderation.text.matching import canonical
from moderation.text.normal import PASSES_FOR
from moderation.text.visible import letter_script
from moderation.text.rules import PATTERN_PREFIX, CompiledRules, rule_matches, validate_term_lists
from tests.moderation.test_normal_form import DISGUISES

LANGUAGES = ("en", "id", "ms")  # the test settings' MODERATION_LANGUAGES
DEFAULTS = default_term_lists(LANGUAGES)
SHIPPED = default_term_lists(shipped_languages())  # every language's lists, each one's when configured
RULES = CompiledRules(SHIPPED)
WORD_TERMS = sorted({t for rule in SHIPPED for t in rule["terms"] if not t.startswith(PATTERN_PREFIX)})
PATTERNS = sorted({t for rule in SHIPPED for t in rule["terms"] if t.startswith(PATTERN_PREFIX)})

ZWSP = "\u200b"
# One Cyrillic look-alike per Latin letter (Unicode confusables): what a writer swaps in, and the
# Latin look-alikes a writer swaps into a Cyrillic word.
CYRILLIC = {"a": "а", "c": "с", "e": "е", "i": "і", "j": "ј", "o": "о", "p": "р", "s": "ѕ", "x": "х", "y": "у"}
LATIN = {cyrillic: latin for latin, cyrillic in CYRILLIC.items()}
LEET = {"a": "4", "e": "3", "i": "1", "o": "0", "s": "$", "t": "7"}


def _words(term: str, disguise) -> str:
    return " ".join(disguise(word) for word in term.split(" "))


def zero_width(term: str) -> str:
    return _words(term, ZWSP.join)


def homoglyph(term: str) -> str:
    """The first letter of each word that has a look-alike swapped for it. A one-letter word (the
    "i" of "i'm") is left alone: written wholly in Cyrillic it is a Cyrillic word, which the normal
    form keeps (moderation/text/normal.py, step 5)."""
    def swap(found: re.Match) -> str:
        word = found.group()
        if len(word) < 2:
            return word
        for i, c in enumerate(word):
            if c in CYRILLIC or c in LATIN:
                return word[:i] + CYRILLIC.get(c, LATIN.get(c)) + word[i + 1:]
        return word
    return re.sub(r"[^\W\d_]+", swap, term)


def reads_as_latin(term: str) -> bool:
    """Whether a word of another alphabet has only letters that pass for Latin ones ("сиськи":
    "и" passes for a small capital reversed N): with one Latin letter in it, the normal form reads
    it as a Latin word, the alphabet that can spell all its letters (moderation/text/normal.py,
    step 5), and the term, kept in its own alphabet, does not match. The homoglyph evasion's one
    exception."""
    return any(not w.isascii() and all(c in PASSES_FOR and all(letter_script(p) == "Latin" for p in PASSES_FOR[c])
                                       for c in w)
               for w in re.findall(r"[^\W\d_]{2,}", term))


def spelt_apart(separator: str):
    """Each word of three letters or more spelt apart; words two apart. Shorter words are left
    as written: the normal form joins a run of three or more single letters only (two, like
    "e.g." or "I a", are common in benign text), and an apostrophe is not one of its separators.
    A word is spelt in its case-folded letters: "ß" folds to "ss", two letters, so "s c h e i ß e"
    is not a run of single letters ("s c h e i s s e" is).
    Words of a phrase spelt apart with spaces are two spaces apart, else a one-letter word and
    the next word would read as one (the known limit "a b o d o h" -> "abodoh")."""
    def spell(term: str) -> str:
        gap = "  " if separator == " " else " "
        return gap.join(separator.join(w.casefold()) if len(w) >= 3 and w.isalnum() else w for w in term.split(" "))
    return spell


def repetition(term: str) -> str:
    """The second letter of each word of two letters or more written five times."""
    return _words(term, lambda w: w[0] + w[1] * 5 + w[2:] if len(w) > 1 and w[1].isalpha() else w)


def leetspeak(term: str) -> str:
    """Every letter after the first of each word with a leet form written in it ("b0d0h",
    "f4gg0t", "f0d4-s3"): the first stays a letter, so that the word is a word (a word of
    digits is a number)."""
    return re.sub(r"[^\W_]+", lambda w: w.group()[:1] + "".join(LEET.get(c, c) for c in w.group()[1:]), term)


def fullwidth(term: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in term)


def mixed(term: str) -> str:
    return zero_width(repetition(homoglyph(leetspeak(term)))).upper()


EVASIONS = {
    "zero-width": zero_width, "homoglyph": homoglyph, "spaced": spelt_apart(" "), "dotted": spelt_apart("."),
    "hyphenated": spelt_apart("-"), "repeated": repetition, "leetspeak": leetspeak, "fullwidth": fullwidth,
    "mixed": mixed,
}


def caught(term: str, text: str) -> bool:
    return any(found.term == term for found in RULES.find(f"so {text} then"))


def test_the_shipped_lists_are_valid_rules_with_the_five_categories():
    assert validate_term_lists(DEFAULTS, languages=LANGUAGES) == []
    assert validate_term_lists(SHIPPED, languages=(*shipped_languages(), "ms")) == []
    assert {rule["category"] for rule in DEFAULTS} == {"insult", "hate", "threat", "sexual", "profanity"}
    assert shipped_languages() == ["de", "en", "es", "fr", "id", "it", "nl", "pt", "ru"]
    assert {rule["language"] for rule in DEFAULTS} == {"en", "id", ""}  # "": emoji, every language
    assert len(WORD_TERMS) > 500 and len(PATTERNS) > 5


@pytest.mark.parametrize("evasion", EVASIONS)
def test_every_default_term_is_caught_through_each_evasion(evasion):
    disguise = EVASIONS[evasion]
    assert all(caught(term, term) for term in WORD_TERMS)  # plain, first: else the evasion proves nothing
    terms = [t for t in WORD_TERMS if not (evasion in ("homoglyph", "mixed") and reads_as_latin(t))]
    assert len(terms) > len(WORD_TERMS) - 10  # the exception is rare
    missed = [(term, disguise(term)) for term in terms if not caught(term, disguise(term))]
    assert missed == []


def test_the_evasions_do_disguise_each_term():
    for term in WORD_TERMS:
        for name, disguise in EVASIONS.items():
            if name in ("spaced", "dotted", "hyphenated") and not any(len(w) >= 3 and w.isalnum() for w in term.split()):
                continue  # nothing to spell apart (see spelt_apart)
            if name == "homoglyph" and not any(c in CYRILLIC or c in LATIN
                                               for w in re.findall(r"[^\W\d_]{2,}", term) for c in w):
                continue  # no letter with a look-alike
            if name == "leetspeak" and not any(c in LEET for w in term.split() for c in w[1:]):
                continue  # no Latin letter with a leet form (a Cyrillic word has none)
            if name == "fullwidth" and term.isascii() is False and not any("!" <= c <= "~" for c in term):
                continue  # no full-width form outside ASCII
            assert disguise(term) != term, (name, term)


def _sequence(pattern: str) -> list[str]:
    """The emoji of a default emoji pattern, in order: it is each emoji, `E(?:GAP E)*`, joined by
    GAP (lab/term_lists.py: `emoji_pattern`)."""
    pieces = pattern[len(PATTERN_PREFIX):].split(EMOJI_GAP)
    return [piece[:-len("(?:")] for piece in pieces if piece.endswith("(?:")]


EMOJI_EVASIONS = {
    "plain": "".join,
    "zero-width": ZWSP.join,
    "spaced": " ".join,
    "variation selector and skin tone": lambda seq: "".join(c + "\ufe0f\U0001f3fd" for c in seq),
    "repeated": lambda seq: "".join(c * 3 for c in seq),
    "mixed": lambda seq: (" " + ZWSP).join(c + "\U0001f3fb" for c in seq),
}


@pytest.mark.parametrize("evasion", EMOJI_EVASIONS)
def test_every_default_emoji_sequence_is_caught_through_spacing_and_invisible_characters(evasion):
    """Emoji have no letters: case, leetspeak, look-alikes and full width do not apply to them.
    A pattern is matched on the text as written (moderation/text/rules.py), so each allows
    spaces, format characters, variation selectors and skin tones between its emoji."""
    missed = []
    for pattern in PATTERNS:
        sequence = _sequence(pattern)
        assert sequence, pattern
        text = f"look {EMOJI_EVASIONS[evasion](sequence)} here"
        if not any(found.term == pattern for found in RULES.find(text)):
            missed.append((pattern, text))
    assert missed == []


# --- no false matches ----------------------------------------------------------------------------

# Benign words that hold a default term (checked below, else the test would prove nothing):
# English, and Indonesian: "cukup" (enough), "perekonomian" (the economy), "mudik" (the journey
# home), "memekik" (to shriek), "pukis" (a cake), "pejuang" (a fighter), "pelerai" (a peacemaker),
# "Pantekosta" (Pentecostal), "asupan" (intake), "kebodohan" (ignorance), "mahoni" (mahogany).
SCUNTHORPE = [
    "Scunthorpe", "assassin", "classic", "cocktail", "therapist", "cockpit", "bass", "passage", "assistant",
    "Hancock", "shitake", "Hitchcock", "Cockburn", "Cunthorpe", "scunt", "asuransi", "masuk", "pasukan", "babinsa", "cukup", "cukur", "cukai", "perekonomian",
    "perekat", "mudik", "memekik", "pukis", "pejuang", "pelerai", "Pantekosta", "asupan", "asumsi", "asuhan",
    "kebodohan", "mahoni", "begonia", "pecundang", "kebangsatan", "monyetnya",
    "страхуйте", "застрахуй",  # Russian: insure (holds хуй)
]
# The rest of the family holds a word the default lists leave out on purpose (sex, anal, tit,
# penis, dick, cum, crap, tai: neutral words, names, or words of other languages): matched by
# nothing. "pantai" (beach) and "santai" (relaxed) hold "tai".
FAMILY = ["Dickens", "Sussex", "Essex", "Middlesex", "analysis", "titular", "Penistone", "shiitake", "cucumber",
          "grapefruit", "arsenal", "scrapbook", "cumulative", "Matsushita", "pantai", "santai", "kontrol", "tempe"]


@pytest.mark.parametrize("word", SCUNTHORPE)
def test_a_word_that_merely_holds_a_default_term_is_not_matched(word):
    letters = canonical(word).replace(" ", "")
    held = [t for t in WORD_TERMS if " " not in canonical(t) and canonical(t) in letters and canonical(t) != letters]
    assert held, word  # else the word proves nothing
    assert RULES.find(f"the {word} here") == [] and RULES.find(word.upper()) == []


@pytest.mark.parametrize("word", FAMILY)
def test_the_rest_of_the_scunthorpe_family_is_not_matched(word):
    assert RULES.find(f"the {word} here") == [] and RULES.find(word.upper()) == []


@pytest.mark.parametrize(("text", "term"), [
    ("dasar anjing kamu", "anjing"),  # also a dog: manual review, a human decides
    ("bego banget sih", "bego"),
    ("you stupid cock", "cock"),
])
def test_a_term_with_a_benign_sense_goes_to_a_human_and_is_not_rejected(text, term):
    actions = {rule["action"] for rule in SHIPPED if term in rule["terms"]}
    assert actions == {"manual_review"}
    assert any(found.term == term for found in RULES.find(text))


@pytest.mark.parametrize("term", ["kontol", "ngentot", "bangsat", "motherfucker", "nigger", "i will kill you",
                                  "kubunuh kau", "cunt", "arschloch", "connard", "gilipollas", "vaffanculo"])
def test_an_unambiguous_term_rejects(term):
    assert {rule["action"] for rule in SHIPPED if term in rule["terms"]} == {"reject"}


@pytest.mark.parametrize(("detection", "rules"), [
    (Detection("en", (("en", 0.9),)), ["insult:manual_review:en"]),             # sure English: the id lists sit out
    (Detection("ms", (("ms", 0.6), ("id", 0.4))), ["profanity:manual_review:id"]),  # Malay reads the id lists
    (Detection("", ()), ["insult:manual_review:en", "profanity:manual_review:id"]),  # unsure: every language's
])
def test_a_language_s_lists_apply_to_its_texts_and_to_texts_of_unsure_language(detection, rules):
    policy = ModerationPolicy(version=1, **{**DEFAULT_POLICY, "term_lists": DEFAULTS})
    found = rule_matches(policy, "what a stupid anjing", detection)
    assert sorted(m.rule for m in found) == rules


# --- the default policy --------------------------------------------------------------------------

@pytest.mark.django_db
def test_a_fresh_installation_starts_with_the_default_lists_of_its_languages():
    first = ModerationPolicy.objects.get(version=1)
    assert first.term_lists == default_term_lists(("en", "id", "ms"))  # the test settings' languages
    assert "default term lists" in first.notes and "en, id" in first.notes


def test_the_lists_of_a_language_the_detector_does_not_know_are_left_out():
    only_english = default_term_lists(("en", "ja"))  # no Japanese list ships
    assert {rule["language"] for rule in only_english} == {"en", ""}
    assert validate_term_lists(only_english, languages=("en", "ja")) == []


def run(*args) -> str:
    out = StringIO()
    call_command("policy_terms", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
class TestAdoptingTheDefaults:
    """An installation whose policy predates the lists (or whose operator removed them) adopts
    them by publishing a version: nothing changes behind the operator's back."""

    @pytest.fixture
    def without_lists(self):
        return services.policy_publish_change(lambda active: {"term_lists": [
            {"category": "insult", "action": "reject", "language": "id", "terms": ["telmi"]}]})

    def test_an_existing_policy_is_left_as_it_is(self, without_lists):
        assert policy_ensure_default() == without_lists
        assert services.policy_active().term_lists == without_lists.term_lists

    def test_defaults_without_publish_prints_the_diff_and_changes_nothing(self, without_lists):
        out = run("defaults")
        assert "profanity:reject:en: +" in out and "Nothing changed" in out
        assert services.policy_active() == without_lists

    def test_defaults_with_publish_adds_the_lists_and_keeps_the_operators_terms(self, without_lists):
        out = run("defaults", "--publish")
        active = services.policy_active()
        assert f"published policy version {without_lists.version + 1}" in out
        insults = next(r for r in active.term_lists if (r["category"], r["action"], r["language"]) == ("insult", "reject", "id"))
        assert "telmi" in insults["terms"] and "bangsat" in insults["terms"]
        assert "every term is already" in run("defaults", "--publish")


# --- the statement of reasons names the category of the term that decided -----------------------

@pytest.fixture
def local(settings):
    settings.MODERATION_PROVIDER = "local"


@pytest.mark.usefixtures("on_commit_callbacks_run")
@pytest.mark.parametrize(("text", "category", "dsa_category"), [
    ("i will kill you tomorrow after school", "threat", "STATEMENT_CATEGORY_VIOLENCE"),
    ("kamu memang bangsat dan semua orang tahu", "insult", "STATEMENT_CATEGORY_CYBER_VIOLENCE"),
    # An insult that only asks for a human comes first in the text; the threat rejected it.
    ("dasar bodoh, aku bunuh kamu nanti malam", "threat", "STATEMENT_CATEGORY_VIOLENCE"),
])
def test_a_rejection_by_a_default_term_names_its_category_in_the_statement_notice_and_dsa_statement(
    local, http, text, category, dsa_category
):
    from moderation.models import TransparencyStatement
    from tests.moderation.test_policy_terms import moderate

    review = moderate(http, text)
    decision = review["decision"]
    assert review["status"] == "rejected" and decision["policy_version"] == 1
    assert decision["reasons"][0]["category"] == category and decision["reasons"][0]["rule"].startswith(f"{category}:reject")
    assert category in decision["notice"]["text"]
    statement = TransparencyStatement.objects.get(review_id=review["id"])
    assert statement.facts["category"] == category and statement.body["category"] == dsa_category


@pytest.mark.django_db
def test_defaults_remove_takes_the_lists_out_and_keeps_an_operators_own_terms(tmp_path):
    own = tmp_path / "own.txt"
    own.write_text("telmi\n", encoding="utf-8")
    run("import", str(own), "--category", "insult", "--action", "reject", "--language", "id", "--publish")
    dry = run("defaults", "--remove")
    assert "insult:reject:id: -" in dry and "Nothing changed" in dry
    assert "published policy version 3" in run("defaults", "--remove", "--publish")
    assert services.policy_active().term_lists == [
        {"category": "insult", "action": "reject", "language": "id", "terms": ["telmi"]}]
    assert "no term is in the rule" in run("defaults", "--remove", "--publish")


def test_the_docs_table_of_the_default_lists_is_the_shipped_files():
    from pathlib import Path

    from moderation.text.default_terms import TERMS_DIR

    docs = (Path(__file__).resolve().parents[2] / "docs" / "policy-rules.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `(\w+)` \| (.*) \|$", docs, re.M))
    categories = ["insult", "hate", "threat", "sexual", "profanity"]
    assert sorted(rows) == sorted([*shipped_languages(), "emoji"])
    for name, row in rows.items():
        rules = json.loads((TERMS_DIR / f"{name}.json").read_text(encoding="utf-8"))
        counts = []
        for category in categories:
            reject, review = (sum(len(r["terms"]) for r in rules if (r["category"], r["action"]) == (category, action))
                              for action in ("reject", "manual_review"))
            counts.append(f"{reject} / {review}" if reject or review else "–")
        total = sum(len(r["terms"]) for r in rules)
        assert row == " | ".join([*counts, str(total)]), name


@pytest.mark.parametrize(("text", "word"), [*DISGUISES, ("dasar tolol", "tolol"), ("🖕🖕🖕", "re:🖕")])
def test_the_issues_disguised_insults_are_not_approved_by_the_default_lists_with_nothing_configured(text, word):
    policy = ModerationPolicy(version=1, **{**DEFAULT_POLICY, "term_lists": DEFAULTS})
    found = rule_matches(policy, text, Detection("", ()))  # the issue's texts are short: unsure
    assert any(word in m.term for m in found), found  # "kill" through the threat "i will kill you"
    assert {m.action for m in found} & {"reject", "manual_review"}


@pytest.mark.parametrize("text", ["Everything was spick and span after the party.",
                                  "Kami butuh sertifikasi ITIL untuk posisi ini."])
def test_an_idiom_or_a_name_holding_a_term_is_not_rejected(text):
    assert {found.term for found in RULES.find(text)} <= {"itil"}
    assert all(rule["action"] == "manual_review" for rule in SHIPPED if "itil" in rule["terms"])
