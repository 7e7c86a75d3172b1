"""Policy rules beside the model: scope, allowlists, languages the model cannot judge, validation."""

from __future__ import annotations

import pytest

from moderation.text.language import Detection, detect
from moderation.models import ModerationPolicy
from moderation.validation import policy_categories, validate_policy
from moderation.verdicts import decide
from moderation.providers import ModerationResult
from moderation.text.rules import parse_terms, term_lists_diff, term_lists_with

INSULT_ID = {"category": "insult", "action": "reject", "language": "id", "terms": ["bodoh", "dasar bodoh"]}
SURE_ID = Detection("id", (("id", 0.91),))
SURE_EN = Detection("en", (("en", 0.9),))
UNSURE = Detection("", (("fr", 0.2), ("en", 0.19)))


def policy(term_lists=(), **fields) -> ModerationPolicy:
    base = {"version": 7, "reject_threshold": 0.9, "review_threshold": 0.5, "flagged_label": "manual_review"}
    return ModerationPolicy(**{**base, "term_lists": list(term_lists), **fields})


def scored(score: float) -> ModerationResult:
    return ModerationResult(model="m", flagged=score >= 0.5, categories={"profanity": score >= 0.5},
                            category_scores={"profanity": score})


def test_a_reject_rule_rejects_even_when_the_model_approves():
    verdict = decide(policy([INSULT_ID], model_languages=[]), scored(0.03), text="dasar b0d0h kamu", detection=SURE_ID)
    assert verdict.label == "rejected"
    assert 'rule insult:reject:id matched term "dasar bodoh" at 0-11 (category insult)' in verdict.explanation
    assert "b0d0h" not in verdict.explanation  # the user's words: the page cuts them from the content
    assert [(m.rule, m.term, m.matched) for m in verdict.rule_matches] == [
        ("insult:reject:id", "dasar bodoh", "dasar b0d0h"), ("insult:reject:id", "bodoh", "b0d0h")
    ]


def test_the_model_still_rejects_what_no_rule_names():
    verdict = decide(policy([INSULT_ID]), scored(0.97), text="you utter idiot", detection=SURE_EN)
    assert verdict.label == "rejected" and verdict.rule_matches == () and verdict.model_used


def test_a_manual_review_rule_sends_an_approved_text_to_a_human_but_not_a_rejected_one_back():
    watch = {"category": "drugs", "action": "manual_review", "language": "", "terms": ["weed"]}
    assert decide(policy([watch]), scored(0.1), text="selling weed", detection=SURE_EN).label == "manual_review"
    assert decide(policy([watch]), scored(0.95), text="selling weed", detection=SURE_EN).label == "rejected"


def test_an_allow_term_suppresses_the_matches_inside_it_not_the_model():
    rules = [{"category": "violence", "action": "reject", "language": "", "terms": ["kill"]},
             {"category": "violence", "action": "allow", "language": "", "terms": ["kill the process"]}]
    allowed = decide(policy(rules), scored(0.1), text="please kill the process", detection=SURE_EN)
    assert allowed.label == "approved"
    assert [m.action for m in allowed.rule_matches] == ["allow"]
    assert 'rule violence:allow allows term "kill the process" at 7-23' in allowed.explanation
    assert decide(policy(rules), scored(0.1), text="kill the process and kill him", detection=SURE_EN).label == "rejected"
    assert decide(policy(rules), scored(0.95), text="kill the process", detection=SURE_EN).label == "rejected"


def test_a_rule_scoped_to_a_language_skips_texts_surely_in_another():
    assert decide(policy([INSULT_ID]), scored(0.1), text="bodoh", detection=SURE_EN).label == "approved"
    assert decide(policy([INSULT_ID]), scored(0.1), text="bodoh", detection=UNSURE).label == "rejected"


def test_a_rule_scoped_to_indonesian_applies_when_malay_leads_too():
    malay_first = Detection("ms", (("ms", 0.55), ("id", 0.40)))
    malay_only = Detection("ms", (("ms", 0.9),))  # close languages: id and ms read alike
    for detection in (malay_first, malay_only):
        assert decide(policy([INSULT_ID], model_languages=[]), scored(0.1), text="kamu bodoh",
                      detection=detection).label == "rejected"


def test_the_model_is_not_used_for_a_language_it_cannot_judge_and_the_fallback_decides():
    text = "rapat dipindah ke jam tiga sore"
    english_only = {"model_languages": ["en"]}  # a model of one language (the bundled one reads id too)
    to_human = decide(policy(**english_only), scored(0.7), text=text, detection=SURE_ID)
    assert to_human.label == "manual_review" and not to_human.model_used and to_human.score is None
    assert "the model judges only en and this text reads as id (id 0.91): its score is not used" in to_human.explanation
    assert "no rule matched" in to_human.explanation
    approved = decide(policy(unjudged_label="approved", **english_only), scored(0.7), text=text, detection=SURE_ID)
    assert approved.label == "approved"


def test_the_bundled_model_judges_indonesian_and_malay_by_default():
    assert policy().model_languages == ["en", "id", "ms"]
    for detection in (SURE_ID, Detection("ms", (("ms", 0.9),))):
        verdict = decide(policy(), scored(0.7), text="kamu bodoh sekali", detection=detection)
        assert verdict.model_used and verdict.label == "manual_review"


def test_an_unsure_detection_leaves_the_judgement_to_the_model():
    verdict = decide(policy(), scored(0.95), text="lol", detection=UNSURE)
    assert verdict.label == "rejected" and verdict.model_used


def test_no_model_languages_means_the_model_judges_every_language():
    assert decide(policy(model_languages=[]), scored(0.95), text="x", detection=SURE_ID).model_used


def test_an_re2_pattern_matches_what_has_no_letters():
    emoji = {"category": "abuse", "action": "reject", "language": "", "terms": ["re:(🤬\\s*){3,}"]}
    verdict = decide(policy([emoji]), scored(0.03), text="🤬🤬🤬", detection=Detection("", ()))
    assert verdict.label == "rejected" and verdict.rule_matches[0].matched == "🤬🤬🤬"


class TestDetection:
    """The real detector over the configured languages (settings.MODERATION_LANGUAGES)."""

    def test_indonesian_is_detected_and_leads(self):
        detection = detect("dasar bodoh kamu")
        assert detection.language in ("id", "ms") and detection.leads("id")

    def test_benign_indonesian_is_surely_not_english(self):
        detection = detect("rapat dipindah ke jam tiga sore")
        assert detection.sure and not detection.leads("en")

    @pytest.mark.parametrize("text", ["shut up you fucking idiot", "shut up you stupid moron", "you are an idiot"])
    def test_short_english_abuse_reads_as_english(self, text):
        assert detect(text).language == "en"

    @pytest.mark.parametrize("text", ["lol ok", "moron", "goblok"])
    def test_fewer_than_three_words_are_unsure(self, text):
        assert not detect(text).sure

    def test_text_without_letters_is_unsure(self):
        assert detect("🤬🤬🤬") == Detection("", ()) == detect("12345")


class TestTermLists:
    def test_a_file_has_one_term_per_line_and_hash_comments(self):
        assert parse_terms("# insults\nbodoh\n  goblok   # stupid\n\nbodoh\n#tolol\n") == ["bodoh", "goblok"]

    def test_adding_terms_creates_the_rule_and_a_diff_names_what_changed(self):
        lists = term_lists_with([], category="insult", action="reject", language="id", add=["bodoh"])
        more = term_lists_with(lists, category="insult", action="reject", language="id", add=["bodoh", "tolol"])
        assert more == [{"category": "insult", "action": "reject", "language": "id", "terms": ["bodoh", "tolol"]}]
        [change] = term_lists_diff(lists, more)
        assert (change.rule, change.added, change.removed) == ("insult:reject:id", ("tolol",), ())

    def test_removing_every_term_drops_the_rule(self):
        assert term_lists_with([INSULT_ID], category="insult", action="reject", language="id",
                               remove=INSULT_ID["terms"]) == []

    def test_adding_removing_and_diffing_compare_each_term_a_bounded_number_of_times(self):
        """Membership in a list compared every term with every other: 30,000 terms added to
        30,000 took a 20 s preview. Every string comparison of the list handling is counted."""
        compared = [0]

        class Counted(str):
            __hash__ = str.__hash__

            def __eq__(self, other):
                compared[0] += 1
                return str.__eq__(self, other)

        old = [Counted(f"term{n}") for n in range(2000)]
        new = [Counted(f"term{n}") for n in range(1000, 3000)]
        rule = {"category": "insult", "action": "reject", "language": "", "terms": old}
        added = term_lists_with([rule], category="insult", action="reject", add=new, remove=old[:10])
        assert added[0]["terms"] == old[10:] + new[1000:]  # order kept: the old list, then what is new
        [change] = term_lists_diff([rule], added)
        assert (change.added, change.removed) == (tuple(new[1000:]), tuple(old[:10]))
        assert compared[0] <= 10 * (len(old) + len(new)), compared[0]

    def test_parsing_a_long_list_takes_time_linear_in_its_length(self):
        # 30,000 terms sharing a long prefix: comparing each with every other took 6 s; reading
        # them once takes milliseconds (a generous bound, not a benchmark).
        import time

        lines = [f"{'x' * 180} {n:08d}" for n in range(30_000)]
        started = time.perf_counter()
        assert parse_terms("\n".join(lines + lines[:10])) == lines
        assert time.perf_counter() - started < 2

    def test_rule_categories_are_policy_categories(self):
        assert {"hate", "insult"} <= set(policy_categories(policy([INSULT_ID], category_thresholds={"hate": {"reject": 0.5}})))


@pytest.mark.parametrize(
    ("term_lists", "error"),
    [
        ("bodoh", "term lists must be a list"),
        ([{"category": "insult", "action": "block", "language": "", "terms": ["x"]}], "action must be one of"),
        ([{"category": "insult", "action": "reject", "language": "xx", "terms": ["x"]}], "language must be empty"),
        ([{"category": "", "action": "reject", "language": "", "terms": ["x"]}], "category must be a name"),
        ([{"category": "insult", "action": "reject", "language": "", "terms": []}], "terms must be a non-empty list"),
        ([{"category": "insult", "action": "reject", "language": "", "terms": ["🤬"]}], "no letter or digit"),
        ([{"category": "insult", "action": "reject", "language": "", "terms": ["re:(a+)+\\1"]}], "is not valid RE2"),
        ([INSULT_ID, INSULT_ID], "appears twice"),
        ([{"category": "insult", "action": "reject", "language": "", "terms": ["x"], "extra": 1}], "expected exactly"),
    ],
)
def test_the_one_validator_refuses_bad_rules_with_a_clear_error(term_lists, error):
    fields = {"reject_threshold": 0.9, "review_threshold": 0.5, "term_lists": term_lists}
    assert any(error in message for message in validate_policy(fields)), validate_policy(fields)


def test_the_validator_refuses_unknown_model_languages_and_fallbacks():
    errors = validate_policy({"reject_threshold": 0.9, "review_threshold": 0.5, "model_languages": ["klingon"],
                              "unjudged_label": "rejected"})
    assert any("model languages" in e for e in errors) and any("unjudged_label" in e for e in errors)


def test_a_text_matching_hundreds_of_times_gets_a_bounded_explanation():
    many = {"category": "insult", "action": "reject", "language": "", "terms": [f"word{n}x" for n in range(30)]}
    text = " ".join(f"word{n % 30}x" for n in range(600))
    verdict = decide(policy([many]), scored(0.1), text=text, detection=SURE_EN)
    assert verdict.label == "rejected"
    assert 'matched term "word0x" at 0-6 (category insult) (20 times)' in verdict.explanation
    assert "20 more rule terms matched" in verdict.explanation and len(verdict.explanation) < 2000
    assert len(verdict.rule_matches) == 100


def test_rules_read_a_texts_own_text_or_the_string_values_of_metadata():
    from moderation.models import Content
    from moderation.verdicts import rule_text

    assert rule_text(Content(kind="text", text="dasar bodoh")) == "dasar bodoh"
    metadata = Content(kind="metadata", metadata={"title": "hi", "comments": [{"body": "kamu bodoh"}], "n": 3})
    assert rule_text(metadata) == "hi\nkamu bodoh"
    assert rule_text(Content(kind="image", media_url="https://example.com/x.png")) == ""


# Every kind of rule, each with a text it matches and a text it does not. Each policy also holds a
# pattern that matches none of these texts and an emoji pattern: a rule that does not match a text
# must leave it alone, whatever else the policy holds.
BYSTANDERS = [{"category": "spam", "action": "manual_review", "language": "", "terms": ["re:zzq\\d{6}"]},
              {"category": "abuse", "action": "reject", "language": "", "terms": ["re:(🤬\\s*){3,}"]}]
KILL = {"category": "violence", "action": "reject", "language": "", "terms": ["kill"]}
ALLOW_PROCESS = {"category": "violence", "action": "allow", "language": "", "terms": ["kill the process"]}
RULE_KINDS = {
    "term": [{"category": "insult", "action": "reject", "language": "", "terms": ["bodoh"]}],
    "phrase": [{"category": "insult", "action": "manual_review", "language": "", "terms": ["dasar bodoh"]}],
    "spelt apart": [{"category": "insult", "action": "reject", "language": "", "terms": ["goblok"]}],
    "pattern": [{"category": "spam", "action": "reject", "language": "", "terms": ["re:https?://\\S+"]}],
    "allow": [KILL, ALLOW_PROCESS],
    "language-scoped": [INSULT_ID],
    "emoji pattern": [],
}


@pytest.mark.parametrize(
    ("kind", "text", "detection", "label", "terms"),
    [
        ("term", "kamu bodoh sekali", SURE_ID, "rejected", ["bodoh"]),
        ("term", "kamu baik sekali, bodohnya tidak", SURE_ID, "approved", []),
        ("phrase", "Dasar, b0d0h!", UNSURE, "manual_review", ["dasar bodoh"]),
        ("phrase", "dasar sangat bodoh", UNSURE, "approved", []),
        ("spelt apart", "dasar g.o.b.l.o.k", UNSURE, "rejected", ["goblok"]),
        ("spelt apart", "g.o.b.l.i.n g o b l o", UNSURE, "approved", []),
        ("pattern", "see http://spam.example/x now", SURE_EN, "rejected", ["re:https?://\\S+"]),
        ("pattern", "no link here, only http talk", SURE_EN, "approved", []),
        ("allow", "please kill the process", SURE_EN, "approved", ["kill the process"]),
        ("allow", "kill the process, then kill him", SURE_EN, "rejected", ["kill the process", "kill"]),
        ("allow", "a skilled process", SURE_EN, "approved", []),
        ("language-scoped", "dasar bodoh kamu", SURE_ID, "rejected", ["dasar bodoh", "bodoh"]),
        ("language-scoped", "dasar bodoh kamu", SURE_EN, "approved", []),
        ("emoji pattern", "🤬🤬 🤬", Detection("", ()), "rejected", ["re:(🤬\\s*){3,}"]),
        ("emoji pattern", "🤬🖕🤬", Detection("", ()), "approved", []),
    ],
)
def test_each_kind_of_rule_decides_the_texts_it_matches_and_leaves_the_others(kind, text, detection, label, terms):
    verdict = decide(policy(RULE_KINDS[kind] + BYSTANDERS, model_languages=[]), scored(0.1), text=text,
                     detection=detection)
    assert (verdict.label, [m.term for m in verdict.rule_matches]) == (label, terms)


@pytest.mark.parametrize("text", ["🤬🤬🤬🖕🖕", "!!! ???", "\u202e\u200b\u200d", "... --- ...", "🤬", "\u0301\u0302"])
def test_a_text_with_no_word_is_decided_by_a_policy_with_every_kind_of_rule(text):
    every = [rule for rules in RULE_KINDS.values() for rule in rules if rule is not INSULT_ID] + BYSTANDERS
    verdict = decide(policy(every, model_languages=[]), scored(0.1), text=text, detection=Detection("", ()))
    assert verdict.label == ("rejected" if text.startswith("🤬🤬🤬") else "approved")


@pytest.mark.parametrize("term", ["🤬🤬", "!!!", "(╯°□°)╯ ┻━┻", "🖕🏻", "*** ???"])
def test_the_pattern_suggested_for_a_term_without_letters_is_valid_and_matches_it(term):
    from moderation.text.rules import CompiledRules, validate_term_lists

    [error] = validate_term_lists([{"category": "abuse", "action": "reject", "language": "", "terms": [term]}],
                                  languages=("en",))
    pattern = error.split("write it as a pattern: ")[1]
    rule = {"category": "abuse", "action": "reject", "language": "", "terms": [pattern]}
    assert validate_term_lists([rule], languages=("en",)) == []
    text = f"well {term} then"
    assert [text[found.start:found.end] for found in CompiledRules([rule]).find(text)] == [term]


@pytest.mark.parametrize(
    ("pattern", "text", "matched"),
    [  # docs/policy-rules.md, "Emoji and symbols, exactly what works": one case per claim
        ("re:🤬", "a 🤬🤬 b", ["🤬", "🤬"]),
        ("re:🖕", "🖕🏻", ["🖕"]),
        ("re:(🤬\\s*){3,}", "🤬🤬 🤬", ["🤬🤬 🤬"]),
        ("re:(🤬\\s*){3,}", "🤬🤬", []),
        ("re:(🤬\\s*){3,}", "🤬🖕🤬🖕🤬", []),
        ("re:(❤\\x{FE0F}?\\s*){3,}", "❤️❤️❤️", ["❤️❤️❤️"]),
        ("re:(❤\\s*){3,}", "❤️❤️❤️", []),
        ("re:[#]tag", "a #tag", ["#tag"]),
        ("re:\\x23tag", "a #tag", ["#tag"]),
    ],
)
def test_emoji_and_symbol_patterns_match_as_the_policy_rules_doc_says(pattern, text, matched):
    from moderation.text.rules import CompiledRules

    assert parse_terms(f"{pattern}   # a comment") == [pattern]
    rule = {"category": "abuse", "action": "reject", "language": "", "terms": [pattern]}
    assert [text[f.start:f.end] for f in CompiledRules([rule]).find(text)] == matched
    verdict = decide(policy([rule, INSULT_ID], model_languages=[]), scored(0.1), text=text, detection=Detection("", ()))
    assert verdict.label == ("rejected" if matched else "approved")


@pytest.mark.parametrize(("term", "suggested"), [("🤬", "re:🤬"), ("!!!", "re:!!!")])
def test_the_validator_names_the_pattern_the_doc_says(term, suggested):
    rule = {"category": "abuse", "action": "reject", "language": "", "terms": [term]}
    assert f"write it as a pattern: {suggested}" in validate_policy(
        {"reject_threshold": 0.9, "review_threshold": 0.5, "term_lists": [rule]})[0]
