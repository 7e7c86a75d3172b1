"""The curation of the default term lists (lab/term_lists.py): which source entries ship, with
which category and action, and why the others do not."""

from __future__ import annotations

import re

import pytest

from lab.term_lists import READERS, decide, emoji_pattern, emoji_sequences

HEADS = {"fuck": ("profanity", "reject"), "ass": ("profanity", "manual_review"), "tahi": ("profanity", "manual_review"),
         "piece of shit": ("insult", "reject"), "bodoh": ("insult", "manual_review")}
DROPS = {"badass": "praise as often as abuse"}


@pytest.mark.parametrize(("entry", "kept", "category", "action", "why"), [
    ("fuck", True, "profanity", "reject", "a reviewed head"),
    ("F*CK", False, "", "", "not kept: neutral, ambiguous or rare (no reviewed head)"),  # "f ck": two words
    ("fuckers", True, "profanity", "reject", "a spelling that contains a reviewed head"),
    ("dumbass", True, "profanity", "manual_review", "a spelling that contains a reviewed head"),
    ("badass", False, "", "", "dropped on review (lab/term_review.py says why)"),
    ("whakakotahitanga", False, "", "", "not kept: neutral, ambiguous or rare (no reviewed head)"),  # tahi inside
    ("fuuuck", True, "profanity", "reject", "a reviewed head"),                   # the normal form reads "fuck"
    ("xxx", False, "", "", "shorter than three letters"),                          # reads "x"
    ("you piece of shit", False, "", "", "a phrase that a head already matches"),
    ("terima kasih", False, "", "", "not kept: neutral, ambiguous or rare (no reviewed head)"),
    ("69", False, "", "", "shorter than three letters"),
    ("1488", False, "", "", "a number"),
    ("b0d0h", True, "insult", "manual_review", "a reviewed head"),                # leetspeak reads as its head
])
def test_each_entry_is_kept_under_a_reviewed_head_or_dropped_with_its_reason(entry, kept, category, action, why):
    decision = decide(entry, HEADS, DROPS)
    assert (decision.kept, decision.category, decision.action, decision.why) == (kept, category, action, why)


def test_the_readers_take_each_sources_own_format():
    assert READERS["dsojevic"]('[{"id": "x", "match": "fu*c*k|fu*ck*er", "tags": [], "severity": 4}]', None) == ["fuck", "fucker"]
    assert READERS["php"]("return [\n    'anjing',\n    'blo\\'on',\n];", None) == ["anjing", "blo'on"]
    ts = "{ word: 'sarap', category: 'insult', region: 'general', severity: 0.6, aliases: ['saraf', 'srap'], }"
    assert READERS["sidee"](ts, None) == ["sarap", "saraf", "srap"]


def test_an_emoji_pattern_allows_gaps_and_repeats_and_drops_what_a_source_pasted_in():
    sequences = emoji_sequences('[{"id": "m", "match": "🖕|\\u200b🖕\\u200b🤬\\u200b|🍆💦*"}]')
    assert sequences == {"m": ["🖕", "🍆💦"]}  # "🖕🤬" holds "🖕": the shorter one is enough
    import re2

    pattern = re2.compile(emoji_pattern("🍆💦")[len("re:"):])
    for text in ("🍆💦", "🍆 💦", "🍆\u200b💦", "🍆🍆💦💦", "🍆\ufe0f💦"):
        assert pattern.search(text), text
    assert not pattern.search("🍆 and 💦") and not re.search("re:", emoji_pattern("🖕")[3:])
