"""Build the default term lists (moderation/data/terms/) from the public lists they are curated
from and the reviewed decisions of lab/term_review.py (docs/policy-rules.md, "Default term lists").

    .venv/bin/python -m lab.term_lists --mirrors /work/.mirror [--check]

`--mirrors` is a directory holding each source repository as a bare git directory,
`<owner>+<name>/repo` (what the `fetch` tool brings, or `git clone --bare`); each file is read at
the commit named in SOURCES below, so the build is reproducible. It writes one JSON file per
language (`en.json`, `id.json`, `de.json`...) and `emoji.json`, each a list of policy rules (the shape of
`ModerationPolicy.term_lists`), and `SOURCES.md`: each source's repository, path, commit,
licence, and how many of its entries were kept and dropped, and why. With `--check` it writes
nothing and exits 1 when a shipped file differs from what it would write.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from lab import term_review as review
from moderation.text.matching import canonical

OUT = Path(__file__).resolve().parent.parent / "moderation" / "data" / "terms"


@dataclass(frozen=True)
class Source:
    key: str
    repo: str
    commit: str
    paths: tuple[str, ...]
    licence: str
    language: str  # the pool its entries join: en, id or emoji
    reader: str
    note: str = ""


SOURCES = (
    Source("surge", "surge-ai/profanity", "77dabf36454fd9b0f85c777c2808d416bc41f797", ("profanity_en.csv",),
           "MIT", "en", "surge"),
    Source("dsojevic-en", "dsojevic/profanity-list", "c27924319aa9bd6f917e3782b4f4b6604a50b652", ("en.json",),
           "MIT", "en", "dsojevic"),
    Source("dsojevic-emoji", "dsojevic/profanity-list", "c27924319aa9bd6f917e3782b4f4b6604a50b652", ("emoji.json",),
           "MIT", "emoji", "dsojevic_emoji"),
    Source("kata-kasar-en", "joshuamanly/kata-kasar", "631d65f607bd130d3d4ff693aa96e1b67b2fce7a",
           ("src/dictionary/blacklist.json",), "MIT", "en", "kata_kasar"),
    Source("kata-kotor-en", "ayahaceh/kata-kotor", "605267f936d8938779628cf85bcf389d1ca8a560",
           ("languages/English.php",), "MIT", "en", "php"),
    Source("sidee", "SideeID/id-profanity-filter", "1debb4226a3f15b7ce1f81e917555b0dd604041e",
           ("src/constants/categories/*.ts", "src/constants/regions/*.ts"), "MIT", "id", "sidee"),
    Source("kata-kasar-id", "joshuamanly/kata-kasar", "631d65f607bd130d3d4ff693aa96e1b67b2fce7a",
           ("src/dictionary/blacklist.json",), "MIT", "id", "kata_kasar"),
    Source("kata-kotor-id", "ayahaceh/kata-kotor", "605267f936d8938779628cf85bcf389d1ca8a560",
           ("languages/BahasaIndonesia.php", "languages/IndoAceh.php"), "MIT", "id", "php"),
    Source("drizki", "drizki/indonesian-badwords", "e6d29aaf5793c6d1e0f484d0b87c83cbf54f3b33", ("src/dict.json",),
           "MIT (package.json)", "id", "json_list"),
    Source("ldnoobw-v2", "LDNOOBWV2/List-of-Dirty-Naughty-Obscene-and-Otherwise-Bad-Words_V2",
           "e2f7430cde6fcc755eca7243d5cf46fc0766ff29", ("data/id.txt", "data/ms.txt"), "CC0 1.0", "id", "lines",
           note="a reviewed seed only: it holds non-insults (ateis, asing, autis, terima kasih) and a person's name"),
    *(Source(f"ldnoobw-{code}", "LDNOOBW/List-of-Dirty-Naughty-Obscene-and-Otherwise-Bad-Words",
             "5faf2ba42d7b1c0977169ec3611df25a3c08eb13", (code,), "CC BY 4.0", code, "lines")
      for code in sorted(review.OTHER_HEADS)),
)


def git_show(mirrors: Path, source: Source, path: str) -> str:
    git_dir = mirrors / source.repo.replace("/", "+") / "repo"
    return subprocess.run(["git", f"--git-dir={git_dir}", "show", f"{source.commit}:{path}"],
                          check=True, capture_output=True, text=True).stdout


def git_glob(mirrors: Path, source: Source, pattern: str) -> list[str]:
    git_dir = mirrors / source.repo.replace("/", "+") / "repo"
    folder = pattern.rsplit("/", 1)[0]
    names = subprocess.run(["git", f"--git-dir={git_dir}", "ls-tree", "--name-only", source.commit, f"{folder}/"],
                           check=True, capture_output=True, text=True).stdout.split()
    suffix = pattern.rsplit("*", 1)[1]
    return sorted(n for n in names if n.endswith(suffix))


# --- readers: a file's text -> its entries (each a term as the source spells it) ---------------------

def _surge(text: str, source: Source) -> list[str]:
    return [row["text"] for row in csv.DictReader(io.StringIO(text))]


def _dsojevic(text: str, source: Source) -> list[str]:
    # `*` marks a letter that may repeat: the spelling without it is the plain word.
    return [m.replace("*", "") for entry in json.loads(text) for m in entry["match"].split("|")]


def _kata_kasar(text: str, source: Source) -> list[str]:
    return json.loads(text)[source.language]


def _json_list(text: str, source: Source) -> list[str]:
    return json.loads(text)


def _php(text: str, source: Source) -> list[str]:
    return [m.replace("\\'", "'") for m in re.findall(r"^\s*'((?:[^'\\]|\\.)*)',?\s*$", text, re.M)]


_SIDEE = re.compile(r"word:\s*'([^']*)',\s*category:\s*'[^']*',\s*region:\s*'[^']*',\s*severity:\s*[\d.]+,"
                    r"\s*aliases:\s*\[([^\]]*)\]")


def _sidee(text: str, source: Source) -> list[str]:
    return [w for word, aliases in _SIDEE.findall(text) for w in (word, *re.findall(r"'([^']*)'", aliases))]


def _lines(text: str, source: Source) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


READERS = {"surge": _surge, "dsojevic": _dsojevic, "kata_kasar": _kata_kasar, "json_list": _json_list,
           "php": _php, "sidee": _sidee, "lines": _lines}


def read_source(mirrors: Path, source: Source) -> list[str]:
    paths = [p for pattern in source.paths
             for p in (git_glob(mirrors, source, pattern) if "*" in pattern else [pattern])]
    return [e.strip().lower() for path in paths for e in READERS[source.reader](git_show(mirrors, source, path), source)
            if e.strip()]


# --- the decision for one entry ------------------------------------------------------------------

@dataclass
class Decision:
    kept: bool
    why: str
    category: str = ""
    action: str = ""
    key: str = ""  # the canonical form the kept term is listed under


_RUN = re.compile(r"(\w)\1\1")


def decide(entry: str, heads: dict[str, tuple[str, str]], drops: dict[str, str]) -> Decision:
    """Keep `entry` as a head, as a spelling that contains one, or drop it, saying why."""
    words = canonical(entry)
    if not words:
        return Decision(False, "no letter or digit")
    by_key = _head_keys(heads)
    if words in by_key:
        return Decision(True, "a reviewed head", *heads[by_key[words]], words)
    if entry in drops or words in drops:
        return Decision(False, "dropped on review (lab/term_review.py says why)")
    letters = words.replace(" ", "")
    if len(letters) < 3:
        return Decision(False, "shorter than three letters")
    if letters.isdigit():
        return Decision(False, "a number")
    if any(_RUN.search(word) for word in words.split(" ")):  # letters in a run were squeezed: digits only
        return Decision(False, "a character written three times in a row")
    if " " in words:
        if any(_contains_words(words, key) for key in by_key):
            return Decision(False, "a phrase that a head already matches")
        return Decision(False, "not kept: neutral, ambiguous or rare (no reviewed head)")
    # A compound that starts or ends with a head ("fuckers", "dumbass", "kontolnya"), or holds a
    # head of five letters or more: a short head inside a word is often chance ("tahi" in
    # "whakakotahitanga", Maori for unity).
    contained = [key for key in by_key if " " not in key and len(key) >= 3
                 and (letters.startswith(key) or letters.endswith(key) or (len(key) >= 5 and key in letters))]
    if contained:
        head = max(contained, key=len)
        category, action = heads[by_key[head]]
        return Decision(True, "a spelling that contains a reviewed head", category, review.ACTION_OF.get(words, action),
                        words)
    return Decision(False, "not kept: neutral, ambiguous or rare (no reviewed head)")


def _head_keys(heads: dict) -> dict[str, str]:
    return {canonical(head): head for head in heads}


def _contains_words(words: str, key: str) -> bool:
    return f" {key} " in f" {words} "


# --- building ------------------------------------------------------------------------------------

@dataclass
class Pool:
    language: str
    terms: dict[str, Decision] = field(default_factory=dict)   # canonical -> decision
    spelling: dict[str, str] = field(default_factory=dict)     # canonical -> the spelling listed
    counts: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))  # source -> why -> n


def _better_spelling(new: str, old: str | None) -> bool:
    """A spelling without leetspeak or symbols reads better in a list than one with them."""
    def plainness(s):
        return (sum(not (c.isalpha() or c in " '-") for c in s), len(s), s)
    return old is None or plainness(new) < plainness(old)


def build_pool(language: str, entries: dict[str, list[str]], heads, drops) -> Pool:
    pool = Pool(language)
    for key in sorted(entries):
        for entry in dict.fromkeys(entries[key]):
            decision = decide(entry, heads, drops)
            pool.counts[key][("kept: " if decision.kept else "dropped: ") + decision.why] += 1
            if decision.kept:
                pool.terms.setdefault(decision.key, decision)
                if _better_spelling(entry, pool.spelling.get(decision.key)):
                    pool.spelling[decision.key] = entry
    for key, spelt in pool.spelling.items():  # leetspeak only in a source's spelling: list the plain one
        if not all(c.isalpha() or c in " '-" for c in spelt):
            pool.spelling[key] = key
    for head in heads:  # a head's own spelling is the one listed
        if canonical(head) in pool.spelling:
            pool.spelling[canonical(head)] = head
    return pool


def own_rules(language: str) -> list[tuple[str, str, str]]:
    return review.OWN_TERMS.get(language, [])


def rules_of(pool: Pool) -> list[dict]:
    grouped: dict[tuple[str, str], list[str]] = defaultdict(list)
    for key, decision in pool.terms.items():
        grouped[(decision.category, decision.action)].append(pool.spelling[key])
    for term, category, action in own_rules(pool.language):
        grouped[(category, action)].append(term)
    return [{"category": c, "action": a, "language": pool.language, "terms": sorted(set(ts))}
            for (c, a), ts in sorted(grouped.items())]


# --- emoji -----------------------------------------------------------------------------------------

# Between the emoji of a sequence: spaces, format characters (zero-width, bidi), a variation
# selector or a skin tone. RE2 syntax.
EMOJI_GAP = r"(?:\s|\p{Cf}|\x{FE0F}|[\x{1F3FB}-\x{1F3FF}])*"
_NOT_EMOJI = re.compile("[\u200b-\u200f\u2060\ufeff\ufe0f\U0001f3fb-\U0001f3ff*\\s]")


def emoji_pattern(sequence: str) -> str:
    """A pattern for `sequence` that also matches it with each emoji repeated ("🍆🍆💦💦") and
    anything of EMOJI_GAP between them."""
    elements = [re.escape(c) for c in _NOT_EMOJI.sub("", sequence)]
    return "re:" + EMOJI_GAP.join(f"{e}(?:{EMOJI_GAP}{e})*" for e in elements)


def emoji_sequences(text: str) -> dict[str, list[str]]:
    """dsojevic's emoji list: {id: its sequences, cleaned, without those holding a shorter one}."""
    found = {}
    for entry in json.loads(text):
        sequences = sorted({_NOT_EMOJI.sub("", m) for m in entry["match"].split("|")} - {""}, key=len)
        kept = []
        for s in sequences:
            if not any(k in s for k in kept):
                kept.append(s)
        found[entry["id"]] = kept
    return found


def emoji_rules(mirrors: Path) -> tuple[list[dict], Counter]:
    source = next(s for s in SOURCES if s.key == "dsojevic-emoji")
    grouped: dict[tuple[str, str], list[str]] = defaultdict(list)
    counts: Counter = Counter()
    for name, sequences in emoji_sequences(git_show(mirrors, source, source.paths[0])).items():
        if name in review.EMOJI_KEEP:
            grouped[review.EMOJI_KEEP[name]] += [emoji_pattern(s) for s in sequences]
            counts["kept: a reviewed entry"] += len(sequences)
        else:
            counts["dropped: not kept on review (lab/term_review.py)"] += len(sequences)
    for _name, sequence, category, action in review.EMOJI_OWN:
        grouped[(category, action)].append(emoji_pattern(sequence))
    rules = [{"category": c, "action": a, "language": "", "terms": sorted(set(ts))}
             for (c, a), ts in sorted(grouped.items())]
    return rules, counts


# --- writing ---------------------------------------------------------------------------------------

def build(mirrors: Path) -> dict[str, str]:
    """{file name: its content} of everything the build writes."""
    entries: dict[str, dict[str, list[str]]] = defaultdict(dict)
    for source in SOURCES:
        if source.language != "emoji":
            entries[source.language][source.key] = read_source(mirrors, source)
    heads = {"en": (review.EN_HEADS, review.EN_DROP_VARIANTS), "id": (review.ID_HEADS, review.ID_DROP_VARIANTS),
             **{code: (review.OTHER_HEADS[code], review.OTHER_DROPS[code]) for code in review.OTHER_HEADS}}
    files, pools = {}, {}
    for language, (head_table, drops) in heads.items():
        missing = [h for h in head_table if not any(
            canonical(h) == canonical(e) for es in entries[language].values() for e in es)]
        if missing:
            raise SystemExit(f"{language}: heads no source lists: {', '.join(missing)}")
        pools[language] = build_pool(language, entries[language], head_table, drops)
        files[f"{language}.json"] = _json(rules_of(pools[language]))
    emoji, emoji_counts = emoji_rules(mirrors)
    files["emoji.json"] = _json(emoji)
    files["SOURCES.md"] = sources_md(pools, emoji_counts, files)
    return files


def _json(rules: list[dict]) -> str:
    return json.dumps(rules, ensure_ascii=False, indent=1) + "\n"


def sources_md(pools: dict[str, Pool], emoji_counts: Counter, files: dict[str, str]) -> str:
    lines = [
        "# Where the default term lists come from",
        "",
        "Generated by `lab/term_lists.py` from the sources below and the reviewed decisions of",
        "`lab/term_review.py`; do not edit by hand (docs/policy-rules.md, \"Default term lists\").",
        "An entry is a term as its source spells it (a spelling variant counts as an entry); entries",
        "that read alike in the normal form are listed once.",
        "",
        "## Shipped",
        "",
        "| file | rule | terms |",
        "|---|---|---|",
    ]
    for name in sorted(files):
        if not name.endswith(".json"):
            continue
        for rule in json.loads(files[name]):
            lines.append(f"| {name} | {rule['category']}:{rule['action']} | {len(rule['terms'])} |")
    lines += ["", "## Sources", ""]
    for source in SOURCES:
        counts = emoji_counts if source.language == "emoji" else pools[source.language].counts[source.key]
        kept = sum(n for why, n in counts.items() if why.startswith("kept"))
        lines += [f"### {source.key}: {source.repo}", "",
                  f"- paths: {', '.join(f'`{p}`' for p in source.paths)}",
                  f"- commit: `{source.commit}`",
                  f"- licence: {source.licence}",
                  f"- pool: {source.language}" + (f"; {source.note}" if source.note else ""),
                  f"- entries: {sum(counts.values())}, kept {kept}, dropped {sum(counts.values()) - kept}", ""]
        lines += [f"  - {why}: {n}" for why, n in sorted(counts.items())]
        lines.append("")
    lines += ["### Project-written", "",
              "Threat phrases (en, id) and threat emoji sequences that no permissive list holds, written for",
              "this project (`OWN_TERMS`, `EMOJI_OWN` in lab/term_review.py): "
              f"{sum(len(v) for v in review.OWN_TERMS.values())} phrases, {len(review.EMOJI_OWN)} sequences.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirrors", type=Path, required=True)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a shipped file differs")
    args = parser.parse_args(argv)
    files = build(args.mirrors)
    differ = [name for name, text in files.items()
              if not (OUT / name).exists() or (OUT / name).read_text(encoding="utf-8") != text]
    if args.check:
        print("term_lists: " + (f"differ: {', '.join(differ)}" if differ else "shipped files are up to date"))
        return 1 if differ else 0
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (OUT / name).write_text(text, encoding="utf-8")
    print(f"term_lists: wrote {', '.join(sorted(files))} to {OUT}")
    return 0


if __name__ == "__main__":
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    sys.exit(main())
