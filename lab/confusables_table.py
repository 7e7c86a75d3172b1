"""Build moderation/data/confusables.txt, the look-alike letters the normal form folds, from
Unicode's confusables.txt (UTS #39; Unicode License v3; docs/design.md, "The normal form").

    python -m lab.confusables_table path/to/confusables.txt > moderation/data/confusables.txt

The source is ICU's copy, `icu4c/source/data/unidata/confusables.txt`. Only what the normal form
uses is kept: each lowercase letter of an alphabet other than Latin whose letters pass for each other's (Latin, Cyrillic,
Greek, Armenian, Cherokee: moderation.text.visible.CONFUSABLE_SCRIPTS, read by the same
`letter_script`) mapped to the lowercase letters it passes for. Unicode maps a letter to a
prototype that is sometimes an odd one ("к" to LATIN SMALL LETTER KRA, "т" to a small capital
T), so where the prototype is not a plain ASCII letter but the capital's is ("К" -> "K"), the
capital's, lowercased, is kept: the normal form is case-folded, and "к" is read as "k".
Characters Python's own Unicode database does not know yet (it lags Unicode's) are left out:
the normal form could not tell their script.
"""

from __future__ import annotations

import re
import sys
import unicodedata

from moderation.text.visible import letter_script

LINE = re.compile(r"^([0-9A-F]{4,6}) ;\t([0-9A-F ]+?) ;\tMA\b")
HEADER_FIELDS = re.compile(r"^# (Date|Version): (.+)$")


def read_prototypes(lines) -> tuple[dict[str, str], dict[str, str]]:
    """{character: its prototype} of every mapping in the file, and the file's Date and Version."""
    prototypes, header = {}, {}
    for line in lines:
        if found := HEADER_FIELDS.match(line):
            header.setdefault(found.group(1), found.group(2).strip())
        elif found := LINE.match(line):
            source = chr(int(found.group(1), 16))
            prototypes[source] = "".join(chr(int(code, 16)) for code in found.group(2).split())
    return prototypes, header


def plain(prototype: str) -> bool:
    return prototype.isascii() and prototype.isalpha()


def read_as(char: str, prototypes: dict[str, str]) -> str | None:
    """The lowercase letters a letter passes for, or None when it passes for none of those scripts."""
    # lower(), not casefold(): "β" passes for "ß", which case-folds to "ss"; its capital's "B" is right.
    direct = prototypes.get(char, char).lower()
    capital = char.upper() if len(char.upper()) == 1 else char
    via_capital = prototypes.get(capital, capital).lower()
    found = direct if plain(direct) or not plain(via_capital) else via_capital
    if found == char or not found or not all(letter_script(c) for c in found):
        return None
    return found


def table(prototypes: dict[str, str]) -> dict[str, str]:
    # Latin letters are left out: the normal form folds a letter into its word's alphabet, and a
    # Latin letter in a word of another alphabet is looked up by itself (moderation.text.normal).
    # Nor what NFKC already turns into another letter (mathematical and full-width letters): the
    # normal form folds look-alikes after NFKC.
    letters = {c for c in prototypes if letter_script(c) not in (None, "Latin") and unicodedata.name(c, "")
               and unicodedata.normalize("NFKC", c) == c}
    letters |= {c.lower() for c in letters if len(c.lower()) == 1 and letter_script(c.lower()) not in (None, "Latin")
                and unicodedata.normalize("NFKC", c.lower()) == c.lower()}
    # The normal form reads a case-folded text: only lowercase letters are looked up.
    return {c: found for c in sorted(letters)
            if c == c.casefold() and (found := read_as(c, prototypes)) is not None}


def main(path: str) -> None:
    with open(path, encoding="utf-8-sig") as source:
        prototypes, header = read_prototypes(source)
    out = sys.stdout
    out.write("# Look-alike letters of the confusable alphabets and the lowercase letters they pass for,\n"
              "# derived by lab/confusables_table.py (docs/design.md, \"The normal form\") from\n"
              "# Unicode confusables.txt (UTS #39), "
              f"Version {header.get('Version', '?')}, Date {header.get('Date', '?')},\n"
              "# as ICU ships it: icu4c/source/data/unidata/confusables.txt.\n"
              "# Source data (c) Unicode, Inc., under the Unicode License v3\n"
              "# (https://www.unicode.org/license.txt): its notice is in NOTICE, at the repository's root.\n"
              "# Format: the letter's code point, a tab, the code points it is read as.\n")
    for char, found in table(prototypes).items():
        out.write(f"{ord(char):04X}\t{' '.join(f'{ord(c):04X}' for c in found)}\n")


if __name__ == "__main__":
    main(sys.argv[1])
