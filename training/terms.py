"""Indonesian terms for the project-written texts, curated from four MIT lists (training/SOURCES.md).

Reads SideeID/id-profanity-filter (terms tagged with a category, a severity and a region),
joshuamanly/kata-kasar (a blacklist and a whitelist of words that contain a term),
ayahaceh/kata-kotor and drizki/indonesian-badwords at the commits named below, and writes
training/data/id_terms.json: each term with its category (the model's names), its region, its
spelling variants and the lists that hold it; and the whitelist. Deterministic:

    python -m training.terms --mirror /work/.mirror

Curation: SideeID's own category decides (insult -> insult, slur -> hate, sexual -> sexual,
profanity and disgusting -> profanity); drugs and blasphemy are left out (not abuse by
themselves). A term of the other three lists that SideeID lacks goes in, as an insult, only
when two of them hold it (as sexual when it names a sexual act or organ: SEXUAL). Everyday words the lists hold are left out (NOT_ABUSE): "lu" (you),
"cina" and "keling" (names a group: an identity attack is how a text uses it, which the
written templates show), "cacat", "autis", "seks", "kondom", "bocah" (child), "alay"...
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path

from training.labels import DATA_DIR
from training.public import Mirror

OUTPUT = DATA_DIR / "id_terms.json"
LISTS = {
    "SideeID/id-profanity-filter": "1debb4226a3f15b7ce1f81e917555b0dd604041e",
    "joshuamanly/kata-kasar": "631d65f607bd130d3d4ff693aa96e1b67b2fce7a",
    "ayahaceh/kata-kotor": "605267f936d8938779628cf85bcf389d1ca8a560",
    "drizki/indonesian-badwords": "e6d29aaf5793c6d1e0f484d0b87c83cbf54f3b33",
}
CATEGORY = {"insult": "insult", "slur": "hate", "sexual": "sexual", "profanity": "profanity",
            "disgusting": "profanity"}
NOT_ABUSE = {
    "lu", "sia", "bui", "biang", "kere", "cina", "keling", "londo", "cacat", "autis", "gembel", "seks", "kondom",
    "desah", "xxx", "lendir", "muntah", "ingus", "rime", "setan", "dajal", "kafir", "alay", "bocah", "bokin",
    "anus", "ass", "sempak", "kampungan", "udik", "ndeso", "edan", "mago", "teho", "roa", "loak", "bugil",
    "toket", "payudara", "pantat", "tetek", "penis", "vagina", "porno", "sperma", "oral", "sex", "gay", "lesbi",
    "homo", "maho", "jablay", "gubug", "polo", "pate", "pante", "hakan", "nyatu", "sial", "halik", "ndas",
    "sungut", "padog", "kurap", "cokor", "binga", "lebok", "ublag",
}
# Terms of the three untagged lists that are sexual, not insults.
SEXUAL = {"entot", "entotan", "ewe", "ewean", "colmek", "jilmek", "kentot", "kenthu", "kentu", "meki", "nyepong",
          "sepong", "peju", "pejuh", "peler", "pepek", "titit", "tempik", "ngocok", "kintil", "konti", "tete"}
_TS_ENTRY = re.compile(r"\{\s*word:\s*'([^']+)',\s*category:\s*'([^']+)',\s*region:\s*'([^']+)',\s*"
                       r"severity:\s*([\d.]+),\s*aliases:\s*\[([^\]]*)\]")


class ListMirror(Mirror):
    def read(self, repo: str, path: str) -> bytes:
        run = subprocess.run(["git", "--git-dir", str(self.git_dir(repo)), "show", f"{LISTS[repo]}:{path}"],
                             capture_output=True, check=True)
        return run.stdout

    def listing(self, repo: str, under: str) -> list[str]:
        run = subprocess.run(["git", "--git-dir", str(self.git_dir(repo)), "ls-tree", "-r", "--name-only",
                              LISTS[repo], under], capture_output=True, text=True, check=True)
        return sorted(run.stdout.split())


def build(mirror: Path) -> dict:
    m = ListMirror(mirror)
    terms: dict[str, dict] = {}
    for path in m.listing("SideeID/id-profanity-filter", "src/constants/"):
        for word, category, region, severity, aliases in _TS_ENTRY.findall(m.text("SideeID/id-profanity-filter", path)):
            word = word.casefold()
            if category not in CATEGORY or word in NOT_ABUSE or float(severity) < 0.4:
                continue
            entry = terms.setdefault(word, {"category": CATEGORY[category], "region": region,
                                            "variants": [], "lists": ["SideeID/id-profanity-filter"]})
            for alias in re.findall(r"'([^']+)'", aliases):
                alias = alias.casefold()
                if alias != word and alias not in entry["variants"] and alias not in NOT_ABUSE:
                    entry["variants"].append(alias)
    others = {
        "joshuamanly/kata-kasar": set(json.loads(m.text("joshuamanly/kata-kasar", "src/dictionary/blacklist.json"))["id"]),
        "ayahaceh/kata-kotor": set(re.findall(r"'([^']+)'", m.text("ayahaceh/kata-kotor", "languages/BahasaIndonesia.php"))),
        "drizki/indonesian-badwords": set(json.loads(m.text("drizki/indonesian-badwords", "src/dict.json"))),
    }
    for name, words in others.items():
        for word in sorted(w.casefold() for w in words):
            if word in terms:
                terms[word]["lists"].append(name)
    for word in sorted(set().union(*others.values())):
        word = word.casefold()
        held = [name for name, words in others.items() if word in {w.casefold() for w in words}]
        if word in terms or word in NOT_ABUSE or len(held) < 2 or not re.fullmatch(r"[a-z' ]{3,}", word):
            continue
        terms[word] = {"category": "sexual" if word in SEXUAL else "insult", "region": "general", "variants": [], "lists": held}
    whitelist = sorted(set(json.loads(m.text("joshuamanly/kata-kasar", "src/dictionary/whitelist.json"))["id"]))
    return {"commits": LISTS, "terms": dict(sorted(terms.items())), "whitelist": whitelist}


def load() -> dict:
    return json.loads(OUTPUT.read_text(encoding="utf-8"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mirror", type=Path, default=Path("/work/.mirror"))
    args = parser.parse_args(argv)
    built = build(args.mirror)
    OUTPUT.write_text(json.dumps(built, ensure_ascii=False, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    by = {}
    for term in built["terms"].values():
        by[term["category"]] = by.get(term["category"], 0) + 1
    print(f"{len(built['terms'])} terms {by}, {len(built['whitelist'])} whitelisted words -> {OUTPUT}")


if __name__ == "__main__":
    main()
