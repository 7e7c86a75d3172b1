"""The public labelled sets the model trains on, read from fetched copies into training/data/public.jsonl.gz.

Each set is read at the commit training/SOURCES.md names, from a bare git directory (the `fetch`
tool's copy under /work/.mirror, or any clone: `--mirror DIR` holds `owner+name/repo`). Only sets
under MIT, CC0 or CC BY 4.0 are read (SOURCES.md). The output is deterministic: the same commits
give the same bytes, so the committed file can be checked by building it again:

    python -m training.public --mirror /work/.mirror

Each row keeps what its source says and no more: a tweet marked "offensive" is a positive of the
category it was marked for and an unknown of the categories the source did not ask about
(training.labels.Row).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import html
import io
import random
import re
import subprocess
import sys
import zipfile
from collections import Counter
from pathlib import Path

from moderation.text import parts as text_parts
from training.labels import CATEGORIES, DATA_DIR, Row, write_rows

OUTPUT = DATA_DIR / "public.jsonl.gz"
SEED = 47

# repository -> commit (the one DATA.md and SOURCES.md name)
COMMITS = {
    "t-davidson/hate-speech-and-offensive-language": "cb50f7e9eb855a99abc51423bf40df0e26d6fe30",
    "HKUST-KnowComp/MLMA_hate_speech": "479836984aebfbd8a0270ca92018980f745e4c44",
    "amandacurry/convabuse": "c0a9469f48956e868276c605d499010ea3c7c0d0",
    "HannahKirk/Hatemoji": "a626f63216158748d072e581efc00267031f4404",
    "microsoft/TOXIGEN": "01517e814639e0334c920a3c502036c8158aac87",
    "uds-lsv/GermEval-2018-Data": "9877472d39523effd54cd079b4c61157ed141508",
    "conversationai/unintended-ml-bias-analysis": "9c7d91aaa53406a362354661a93e07956d95e59a",
    "ipavlopoulos/toxic_spans": "beaf170538df8275c3447b2e26070f2f82e55272",
    "IndoNLP/indonlu": "ce728f6926a36174b9923dfe49d6a6839b6e9bb7",
}
# Benign Indonesian long-form text (IndoNLU's SmSA, Apache-2.0): its own file, so that the public
# labelled sets above need not be fetched again to rebuild it (`--benign-id`).
BENIGN_ID_OUTPUT = DATA_DIR / "benign_id.jsonl.gz"
ALL_BUT = {c: tuple(x for x in CATEGORIES if x != c) for c in CATEGORIES}


class Mirror:
    def __init__(self, root: Path):
        self.root = root

    def git_dir(self, repo: str) -> Path:
        base = self.root / repo.replace("/", "+") / "repo"
        return base / ".git" if (base / ".git").is_dir() else base

    def read(self, repo: str, path: str) -> bytes:
        run = subprocess.run(["git", "--git-dir", str(self.git_dir(repo)), "show", f"{COMMITS[repo]}:{path}"],
                             capture_output=True, check=False)
        if run.returncode:
            raise SystemExit(f"cannot read {repo}@{COMMITS[repo][:12]}:{path}: {run.stderr.decode().strip()}")
        return run.stdout

    def text(self, repo: str, path: str) -> str:
        return self.read(repo, path).decode("utf-8")

    def csv(self, repo: str, path: str, **kwargs) -> list[dict]:
        return list(csv.DictReader(io.StringIO(self.text(repo, path)), **kwargs))


_MENTION = re.compile(r"@\w+")
_URL = re.compile(r"https?://\S+|\bURL\b|@URL")
_SPACES = re.compile(r"\s+")


def tidy(text: str) -> str:
    """A tweet as a comment would read: entities decoded, handles and links made generic, the
    retweet marker dropped, spaces collapsed."""
    text = html.unescape(text)
    text = _URL.sub("http://example.com", text)
    text = _MENTION.sub("@user", text)
    text = re.sub(r"^(?:!+\s*)?RT\s+@user:?\s*", "", text)
    text = re.sub(r"(?:@user\s*){2,}", "@user ", text)
    return _SPACES.sub(" ", text).strip()


def davidson(m: Mirror) -> list[Row]:
    repo = "t-davidson/hate-speech-and-offensive-language"
    rows = []
    for r in m.csv(repo, "data/labeled_data.csv"):
        text = tidy(r["tweet"])
        if r["class"] == "0":  # hate speech (mostly slurs, with profanity)
            rows.append(Row(text, "en", "davidson", ("hate",), ("insult", "profanity", "sexual")))
        elif r["class"] == "1":  # offensive: mostly profanity and insults, not hate
            rows.append(Row(text, "en", "davidson", ("profanity",), ("insult", "sexual")))
        else:
            rows.append(Row(text, "en", "davidson"))
    offensive = [r for r in rows if r.positive == ("profanity",)]
    random.Random(SEED).shuffle(offensive)
    keep = {id(r) for r in offensive[:6000]}  # 19,190 offensive rows: 6,000 are enough beside the rest
    return [r for r in rows if r.positive != ("profanity",) or id(r) in keep]


def mlma(m: Mirror) -> list[Row]:
    repo = "HKUST-KnowComp/MLMA_hate_speech"
    archive = zipfile.ZipFile(io.BytesIO(m.read(repo, "hate_speech_mlma.zip")))
    rows = []
    for language, name in (("en", "en_dataset_with_stop_words.csv"), ("fr", "fr_dataset.csv"), ("ar", "ar_dataset.csv")):
        for r in csv.DictReader(io.StringIO(archive.read(f"hate_speech_mlma/{name}").decode("utf-8"))):
            kinds = set(r["sentiment"].split("_"))
            text = tidy(r["tweet"])
            if kinds == {"normal"}:
                rows.append(Row(text, language, "mlma"))
            elif "normal" in kinds:
                continue  # annotators disagreed whether it is normal at all
            elif kinds & {"hateful", "fearful"}:
                rows.append(Row(text, language, "mlma", ("hate",), ("insult", "profanity", "sexual")))
            else:  # offensive, abusive, disrespectful
                rows.append(Row(text, language, "mlma", ("insult",), ("hate", "profanity", "sexual")))
    return rows


def convabuse(m: Mirror) -> list[Row]:
    repo = "amandacurry/convabuse"
    rows = []
    for split in ("train", "valid", "test"):
        for r in m.csv(repo, f"2_splits/ConvAbuseEMNLP{split}.csv"):
            votes, kinds = [], Counter()
            for k in range(1, 9):
                marks = {level: r.get(f"Annotator{k}_is_abuse.{level}", "") for level in ("1", "0", "-1", "-2", "-3")}
                if not any(v.strip() for v in marks.values()):
                    continue
                votes.append(any(marks[level] == "1" for level in ("-1", "-2", "-3")))
                for kind in ("ableist", "homophobic", "racist", "sexist", "sex_harassment", "transphobic", "intellectual"):
                    if r.get(f"Annotator{k}_{kind}") == "1":
                        kinds[kind] += 1
            text = _SPACES.sub(" ", r["user"]).strip()
            if not votes or not text:
                continue
            if sum(votes) * 2 < len(votes):
                if not any(votes):
                    rows.append(Row(text, "en", "convabuse"))
                continue  # abusive for a minority: neither a clean negative nor a positive
            positive = {"insult"}
            half = len(votes) / 2
            if kinds["sex_harassment"] >= half:
                positive.add("sexual")
            if any(kinds[k] >= half for k in ("ableist", "homophobic", "racist", "sexist", "transphobic")):
                positive.add("hate")
            rows.append(Row(text, "en", "convabuse", tuple(sorted(positive)), ("profanity",)))
    return rows


def hatemoji(m: Mirror) -> list[Row]:
    repo = "HannahKirk/Hatemoji"
    rows = []
    for split in ("train", "validation", "test"):
        for r in m.csv(repo, f"HatemojiBuild/{split}.csv"):
            text = _SPACES.sub(" ", r["text"]).strip()
            if r["label_gold"] == "1":
                positive = ("hate", "threat") if r["type"] == "threateninglanguage" else ("hate",)
                unknown = ("insult", "profanity") + (() if "threat" in positive else ("threat",))
                rows.append(Row(text, "en", "hatemoji", positive, unknown, group=f"hatemoji-{r['entry_id']}"))
            else:
                rows.append(Row(text, "en", "hatemoji", group=f"hatemoji-{r['entry_id']}"))
    return rows


def toxigen(m: Mirror) -> list[Row]:
    repo = "microsoft/TOXIGEN"
    listing = subprocess.run(["git", "--git-dir", str(m.git_dir(repo)), "ls-tree", "-r", "--name-only",
                              COMMITS[repo], "demonstrations/"], capture_output=True, text=True, check=True).stdout
    rows = []
    for path in sorted(p for p in listing.split() if p.endswith(".txt")):
        name = path.rsplit("/", 1)[1]
        hateful = name.startswith("hate_")
        for line in m.text(repo, path).splitlines():
            text = _SPACES.sub(" ", line.lstrip("- ")).strip()
            if text:
                rows.append(Row(text, "en", "toxigen", ("hate",) if hateful else (),
                                ("insult", "profanity") if hateful else ()))
    return rows


def germeval(m: Mirror) -> list[Row]:
    repo = "uds-lsv/GermEval-2018-Data"
    rows = []
    for name in ("germeval2018.training.txt", "germeval2018.test.txt"):
        for line in m.text(repo, name).splitlines():
            parts = line.split("\t")
            if len(parts) < 3:
                continue
            text, fine = tidy(parts[0].replace("|LBR|", " ")), parts[2].strip()
            if fine == "OTHER":
                rows.append(Row(text, "de", "germeval"))
            elif fine == "PROFANITY":
                rows.append(Row(text, "de", "germeval", ("profanity",), ("insult",)))
            elif fine == "INSULT":
                rows.append(Row(text, "de", "germeval", ("insult",), ("profanity",)))
            elif fine == "ABUSE":  # degrading a person or a group: often an identity attack
                rows.append(Row(text, "de", "germeval", ("insult",), ("hate", "profanity")))
    return rows


def jigsaw_templates(m: Mirror) -> list[Row]:
    """Synthetic identity sentences, toxic or not: "being gay is disgusting" beside "being gay is
    fine". Each template's rows form one group. A sample per language, and no English: the English
    sets are real posts, and these templates (a score by template, not by post) skewed the
    calibration of `hate` (training/RESULTS.md)."""
    repo = "conversationai/unintended-ml-bias-analysis"
    rows = []
    for language, name, count in (("de", "de", 3000), ("nl", "nl", 3000),
                                  ("zh", "zh-cn", 3000), ("hi", "hi-Latn", 3000)):
        found = m.csv(repo, f"sentence_templates/{name}_sentence_templates.csv")
        random.Random(f"{SEED}-{language}").shuffle(found)
        for r in found[:count]:
            text = _SPACES.sub(" ", r["phrase"]).strip()
            toxic = r["toxicity"] == "toxic"
            rows.append(Row(text, language, "jigsaw-templates", ("hate",) if toxic else (),
                            ("insult", "profanity") if toxic else (), group=f"jigsaw-{language}-{r['template']}"))
    return rows


def toxic_spans(m: Mirror) -> list[Row]:
    """Civil Comments posts that annotators found toxic spans in (positives only): the short ones,
    as insults (their spans are mostly "stupid", "idiot", "moron"); the other categories unknown."""
    repo = "ipavlopoulos/toxic_spans"
    rows = []
    for name in ("tsd_train", "tsd_trial", "tsd_test"):
        for r in m.csv(repo, f"SemEval2021/data/{name}.csv"):
            text = _SPACES.sub(" ", r["text"]).strip()
            if 10 <= len(text) <= 240 and r["spans"].strip("[] "):
                rows.append(Row(text, "en", "toxic-spans", ("insult",), ALL_BUT["insult"]))
    random.Random(SEED).shuffle(rows)
    return rows[:3000]


READERS = (davidson, mlma, convabuse, hatemoji, toxigen, germeval)


def _listed_words() -> re.Pattern:
    """Every curated Indonesian term and spelling variant (training/data/id_terms.json) and the core
    insults the written texts use, as one whole-word pattern."""
    from training.terms import load as load_terms
    from training.written import ID_ADJ_INSULTS, ID_ANIMALS, ID_CORE_INSULTS, ID_POLITICAL_INSULTS, ID_PROFANITY

    terms = load_terms()["terms"]
    words = {w for word, e in terms.items() for w in (word, *e["variants"])}
    words |= {*ID_CORE_INSULTS, *ID_ADJ_INSULTS, *ID_ANIMALS, *ID_POLITICAL_INSULTS, *ID_PROFANITY}
    return re.compile(r"\b(?:" + "|".join(re.escape(w.casefold()) for w in sorted(words, key=len, reverse=True)) + r")\b")


def indonlu_smsa(m: Mirror) -> list[Row]:
    """IndoNLU's SmSA (Purwarianti & Crisdayanti 2019; Wilie et al. 2020), Apache-2.0: Indonesian
    reviews and comments (restaurants, places, films, some politics) labelled by sentiment, many of
    them long. Only the positive and neutral ones, as benign rows: a negative one may insult
    someone, and sentiment says nothing about abuse. A row holding a listed term or an insult the
    written texts use is left out too (it may be abuse the label does not tell of)."""
    repo = "IndoNLP/indonlu"
    listed = _listed_words()
    rows = []
    for path in ("dataset/smsa_doc-sentiment-prosa/train_preprocess.tsv",
                 "dataset/smsa_doc-sentiment-prosa/valid_preprocess.tsv"):
        for line in m.text(repo, path).splitlines():
            text, _, label = line.rpartition("\t")
            text = _SPACES.sub(" ", text).strip()
            if label in ("positive", "neutral") and text and not listed.search(text.casefold()):
                group = "smsa-" + hashlib.sha256(text.casefold().encode()).hexdigest()[:16]
                rows.append(Row(text, "id", "indonlu-smsa", group=group))
                # Its sentences too, as the provider scores a long text's parts (moderation.text.parts):
                # without them "enak ." (tasty) scored sexual 0.68 and "harus sabar ." threat 0.94.
                found = text_parts.parts(text)
                if len(found) > 1:
                    rows += [Row(text[a:b], "id", "indonlu-smsa", group=group) for a, b in found]
    return rows


def build(mirror: Path, readers=READERS) -> list[Row]:
    m = Mirror(mirror)
    rows, seen = [], set()
    for reader in readers:
        for row in reader(m):
            key = row.text.casefold()
            if len(row.text) < 2 or key in seen:
                continue  # a text twice (retweets, shared templates) is one row: its first label
            seen.add(key)
            group = row.group or "text-" + hashlib.sha256(key.encode()).hexdigest()[:16]
            rows.append(Row(row.text, row.language, row.source, row.positive, row.unknown, group))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mirror", type=Path, default=Path("/work/.mirror"),
                        help="the folder holding owner+name/repo git directories")
    parser.add_argument("--output", type=Path, default=None,
                        help=f"default {OUTPUT}, or {BENIGN_ID_OUTPUT} with --benign-id")
    parser.add_argument("--benign-id", action="store_true",
                        help="build the benign Indonesian long-form rows (IndoNLU SmSA) instead")
    args = parser.parse_args(argv)
    args.output = args.output or (BENIGN_ID_OUTPUT if args.benign_id else OUTPUT)
    rows = build(args.mirror, (indonlu_smsa,) if args.benign_id else READERS)
    write_rows(args.output, rows)
    counts = Counter((r.source, r.language, r.label) for r in rows)
    for (source, language, label), n in sorted(counts.items()):
        print(f"{source:18} {language:3} {'abusive' if label else 'benign':8} {n:6}")
    print(f"{len(rows)} rows -> {args.output} ({args.output.stat().st_size} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
