"""Outside test sets: public labelled data the model never trained on and no threshold was chosen on.

    python -m training.outside [--mirror /work/.mirror] [--output /tmp/outside]

Reads each set from a fetched copy (a bare git directory per repository, at the commit named
below) and writes it as a CSV that `manage.py evaluate_policy --data FILE` reads (text, label,
language, and the set's functionality or source in `category`, so the figures come per
functionality). Seven of these sets may not be shared: they are read here and written only to
`--output` (outside the repository by default), never committed. It also prints the model's own
figures under the initial policy's thresholds (no language detection, no rules), per set and,
for the functional suites, per functionality:

- surge-ai/toxicity (en, MIT): 1,000 social media comments, toxic or not;
- HateCheck (en, CC BY 4.0): 3,728 functional cases (hateful / non-hateful), 29 functionalities;
- SEAHateCheck, Indonesian gold cases (no licence: test only): 8,190 cases, 22 functionalities;
- Indonesian online news comments (no licence: test only): 3,184 comments, abusive (2, 3) or not (1);
- Indonesian Instagram comments on public figures (Luqyana et al. 2018; "for personal use": test
  only): 400 comments, 200 bullying ("negative") and 200 not ("positive");
- Indonesian tweets, abusive or not (Hidayatullah et al. 2019; no licence: test only): 5,462
  rows, 2,731 of each label (0.0 is abusive: see `examples`); a tweet found more than once is
  kept once, and one labelled both ways not at all;
- Indonesian Facebook posts, hate speech or not (Aulia & Budi 2019; no licence: test only): 906
  long posts, 229 hateful;
- RTP-LX (de Wynter et al. 2025, MIT), Indonesian, and likewise German, French and Arabic (its
  English file holds no prompt text at this commit): about 1,100 web-text prompts per language
  (translated from English but for about 100 written for the language's own context), rated for
  toxicity (1 to 5) by three native speakers;
  toxic where the median rating is 3 or more, benign where it is 1, those rated 2 ("slightly")
  left out;
- ETHOS, binary (Mollas et al. 2022; GPL-3.0: test only): 998 YouTube and Reddit comments, hate
  speech where at least half of the annotators said so, as its authors' loader reads it;
- Stormfront (de Gibert et al. 2018; CC BY-SA 3.0 ES: test only): 10,944 sentences of a white
  supremacist forum, hate or not (those labelled "relation" or "idk/skip" left out);
- CADD, test split (Song et al. 2021; CC BY-SA 4.0, and its guidelines ask that no part be
  shared: test only): 4,901 Reddit comments, abusive or not (`L2`: hate, derogatory or profane);
- YouToxic (1,000 YouTube comments on the 2014 Ferguson unrest, hand-labelled toxic or not; no
  licence: test only);
- CAT small (Pavlopoulos et al. 2020; Wikipedia talk-page comments, CC BY-SA: test only): 978
  comments, toxic or not as raters judged them without their parent (`label_oc`).

Rows that share passages with a set reserved for independent evaluation (found by the project's
reserved-text scan; the hashes of their texts are in `EXCLUDED`) are left out.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import statistics
import subprocess
import tarfile
import zipfile
from collections import defaultdict
from pathlib import Path
from xml.etree import ElementTree

import numpy as np

from moderation.providers.local_model import MODEL_PATH, load
from moderation.text.normal import normalize

SETS = {
    "surge-en": ("surge-ai/toxicity", "ea80324b95ed7e3cc787bdb6faeb763fcc0ae258", "toxicity_en.csv"),
    "hatecheck-en": ("paul-rottger/hatecheck-data", "d84302298ceeb34f4b0dde2d8a1f4932c2caa612", "test_suite_cases.csv"),
    "seahatecheck-id": ("Social-AI-Studio/SEAHateCheck", "ad83e4cc8d6b24db34c629c3789c2e49cf400685",
                        "dataset/gold_label_all/id.csv"),
    "news-comments-id": ("dhamirdesrul/Indonesian-Online-News-Comments", "8507c86194ddfc807b7905ae09948342c15ef031",
                         "Dataset/Abusive Language Detection on Indonesian Online News Comments Dataset .xlsx"),
    "instagram-id": ("rizalespe/Dataset-Sentimen-Analisis-Bahasa-Indonesia", "9d792604b1297bece6dbdf4d3c5101560d34a892",
                     "dataset_komentar_instagram_cyberbullying.csv"),
    "abusive-tweets-id": ("fathanick/Dataset-for-Abusive-and-Non-Abusive-Tweet-Identification",
                          "8aa18672c2c4410f1b0f6078a3df9cfaa8062f47", "abusive-content-all-data-clean.xlsx"),
    "facebook-hate-id": ("nofaulia/hate-speech-detection", "4adbede067d36ea0e220985ff18faba73250e996",
                         "data/dataset.csv"),
    **{f"rtp-lx-{language}": ("microsoft/RTP-LX", "d64f1098b959fcb708eb1ac313886fdf25f2bfee",
                              f"RTP-LX/RTP_LX_{language.upper()}.json") for language in ("id", "de", "fr", "ar")},
    "ethos-en": ("intelligence-csd-auth-gr/Ethos-Hate-Speech-Dataset", "705258e118ce9611ebbd5ab2a4841b0066547293",
                 "ethos/ethos_data/Ethos_Dataset_Binary.csv"),
    # One sentence a file (all_files/ID.txt), its label in annotations_metadata.csv.
    "stormfront-en": ("Vicomtech/hate-speech-dataset", "b802137e8314c38a8d4faa965f9908d6c8e7a84d",
                      "annotations_metadata.csv"),
    "cadd-en": ("nlpcl-lab/CADD_dataset", "090f41c26976b2f763ff445cd6d5840d42a4ddeb", "Dataset/CADD_test.json"),
    "youtoxic-en": ("Milos-Sstanojevic/YouTubeAPI", "8d6234b219bb9b2326e62de6d908151cdfbfa423",
                    "youtoxic_english_1000.csv"),
    "cat-small-en": ("ipavlopoulos/context_toxicity", "5df49c294e6a41f0ba351e65fda7c315aa4cc168",
                     "data/CAT_SMALL/cat_small.csv"),
}
# SHA-256 (first 16 hex digits) of the texts, as the set holds them, that share two or more
# five-word passages with a reserved set: tested on neither.
EXCLUDED = {
    "abusive-tweets-id": {"4318d71d12feb871", "931111ec1b0c2ddd", "9a01cccd9073fff1", "e131754cd512e7dc",
                          "ea1b6e354dc55873"},
    "facebook-hate-id": {"41206ec6835d13f7", "873b62fe93ac329e", "9e6e51fde25b3aa9", "a53ba9b801a0e62b"},
    "stormfront-en": {"dc4a94aeca6841af", "f6c9b2f0fef73fa5"},
    "cadd-en": {"5e3974b3b9c8a69d", "b9594d6e51b35ed8", "d09bc2ca1e1af071", "f20ccd5fe42b5f3a"},
    "youtoxic-en": {"fce0973b042a211c"},
}
_SHEET = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"


def read(mirror: Path, name: str) -> bytes:
    """The set's file, at its commit."""
    _, commit, path = SETS[name]
    return _git(mirror, name, path, "show", f"{commit}:{path}")


def read_folder(mirror: Path, name: str, folder: str) -> dict[str, bytes]:
    """Every file under `folder` of a set's repository, at its commit, by its path."""
    _, commit, _ = SETS[name]
    tar = _git(mirror, name, folder, "archive", "--format=tar", commit, folder)
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        return {member.name: archive.extractfile(member).read() for member in archive if member.isfile()}


def _git(mirror: Path, name: str, what: str, *args: str) -> bytes:
    """What `git <args>` prints in the fetched copy of the set's repository (`what` names the
    file or folder read, for the error)."""
    repo, commit, _ = SETS[name]
    base = mirror / repo.replace("/", "+") / "repo"
    git_dir = base / ".git" if (base / ".git").is_dir() else base
    run = subprocess.run(["git", "--git-dir", str(git_dir), *args], capture_output=True, check=False)
    if run.returncode:
        raise SystemExit(f"cannot read {repo}@{commit[:12]}:{what} under {mirror}: {run.stderr.decode().strip()}")
    return run.stdout


def _row(text: str, label: bool, language: str, category: str) -> dict:
    """An example, its whitespace folded to single spaces (a comment's line breaks and doubled
    spaces are not what it is judged on)."""
    return {"text": " ".join(text.split()), "label": int(label), "language": language, "category": category}


def csv_rows(data: bytes, delimiter: str = ",") -> csv.DictReader:
    """A CSV file's rows by its header, read as UTF-8 with or without a byte-order mark."""
    return csv.DictReader(io.StringIO(data.decode("utf-8-sig")), delimiter=delimiter)


def xlsx_rows(data: bytes) -> list[list[str]]:
    """The first sheet of an .xlsx as rows of strings (shared strings resolved)."""
    archive = zipfile.ZipFile(io.BytesIO(data))
    shared = [
        "".join(t.text or "" for t in item.iter(f"{_SHEET}t"))
        for item in ElementTree.fromstring(archive.read("xl/sharedStrings.xml")).findall(f"{_SHEET}si")
    ]
    rows = []
    for row in ElementTree.fromstring(archive.read("xl/worksheets/sheet1.xml")).iter(f"{_SHEET}row"):
        values = []
        for cell in row.findall(f"{_SHEET}c"):
            value = cell.find(f"{_SHEET}v")
            text = value.text if value is not None and value.text is not None else ""
            # An empty cell may be missing: the reference ("C7") says which column this one is.
            column = _column(cell.get("r")) if cell.get("r") else len(values)
            values.extend([""] * (column - len(values)))
            values.append(shared[int(text)] if cell.get("t") == "s" else text)
        rows.append(values)
    return rows


def _column(reference: str) -> int:
    """The 0-based column of a cell reference: "A1" -> 0, "AB12" -> 27."""
    n = 0
    for letter in reference.rstrip("0123456789"):
        n = n * 26 + ord(letter) - ord("A") + 1
    return n - 1


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _unique(rows: list[dict], name: str) -> list[dict]:
    """The rows without those in EXCLUDED, each text once; a text the set labels both ways is
    left out."""
    labels = defaultdict(set)
    for row in rows:
        labels[row["text"]].add(row["label"])
    seen, kept = set(EXCLUDED.get(name, ())), []
    for row in rows:
        key = text_hash(row["text"])
        if row["text"] and key not in seen and len(labels[row["text"]]) == 1:
            seen.add(key)
            kept.append(row)
    return kept


def examples(mirror: Path, name: str) -> list[dict]:
    """Rows of {text, label, language, category} of one set."""
    data = read(mirror, name)
    if name == "surge-en":
        return [{"text": r["text"], "label": int(r["is_toxic"] == "Toxic"), "language": "en", "category": "surge"}
                for r in csv_rows(data)]
    if name == "hatecheck-en":
        return [{"text": r["test_case"].strip(), "label": int(r["label_gold"] == "hateful"), "language": "en",
                 "category": r["functionality"]} for r in csv_rows(data)]
    if name == "seahatecheck-id":
        return [{"text": r["c_testcase"].strip(), "label": int(r["t_gold"] == "hateful"), "language": "id",
                 "category": r["t_function"]} for r in csv_rows(data)]
    if name == "instagram-id":
        return [_row(r["Instagram Comment Text"], r["Sentiment"] == "negative", "id", "instagram")
                for r in csv_rows(data)]
    if name == "abusive-tweets-id":
        # Columns: index, tweet, cleanText, label. The README does not say which label is which;
        # the tweets labelled 0.0 hold the common swear words (230 of the 232 with "anjing", all
        # 225 with "bangsat"), and "terima kasih" only those labelled 1.0: 0.0 is abusive.
        labelled = [r for r in xlsx_rows(data)[1:] if len(r) >= 4 and r[3]]
        return _unique([_row(r[1], float(r[3]) == 0, "id", "tweets") for r in labelled], name)
    if name == "facebook-hate-id":
        return _unique([_row(r["text"], r["label"] == "1", "id", "facebook") for r in csv_rows(data)], name)
    if name.startswith("rtp-lx-"):
        rated = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
        medians = [(r["Prompt"].strip(), statistics.median(r["AnnotationsRaw"]["Toxicity"])) for r in rated]
        return [{"text": text, "label": int(median >= 3), "language": name.removeprefix("rtp-lx-"),
                 "category": "rtp-lx"} for text, median in medians if median >= 3 or median == 1]
    if name == "ethos-en":
        return _unique([_row(r["comment"], float(r["isHate"]) >= 0.5, "en", "ethos")
                        for r in csv_rows(data, delimiter=";")], name)
    if name == "stormfront-en":
        sentences = read_folder(mirror, name, "all_files")
        labelled = [r for r in csv_rows(data) if r["label"] in ("hate", "noHate")]
        return _unique([_row(sentences[f"all_files/{r['file_id']}.txt"].decode("utf-8", "replace"),
                             r["label"] == "hate", "en", "stormfront") for r in labelled], name)
    if name == "cadd-en":
        return _unique([_row(r["comment"], r["L2"] == "1", "en", "reddit") for r in json.loads(data).values()], name)
    if name == "youtoxic-en":
        return _unique([_row(r["Text"], r["IsToxic"] == "TRUE", "en", "youtube") for r in csv_rows(data)], name)
    if name == "cat-small-en":
        return _unique([_row(r["text"], r["label_oc"] == "1", "en", "wikipedia") for r in csv_rows(data)], name)
    rows = xlsx_rows(data)[1:]  # news comments: Kalimat, label (1 not abusive, 2 abusive, 3 abusive and offensive)
    return [_row(r[0], r[1] in ("2", "3"), "id", "news")
            for r in rows if len(r) >= 2 and r[0].strip() and r[1] in ("1", "2", "3")]


def decided(p: np.ndarray, model) -> np.ndarray:
    """0 approved, 1 to a human, 2 rejected under the thresholds the training chose, which the
    initial policy takes (tests/moderation/test_local_model.py holds them equal): the model alone."""
    levels = model.meta["thresholds"]
    review = np.array([levels[c]["review"] for c in model.categories])
    reject = np.array([levels[c]["reject"] for c in model.categories])
    return np.where((p >= reject).any(axis=1), 2, np.where((p >= review).any(axis=1), 1, 0))


def figures(label: np.ndarray, outcome: np.ndarray) -> str:
    flagged = outcome > 0
    tp = int((flagged & (label == 1)).sum())
    precision = tp / max(int(flagged.sum()), 1)
    recall = tp / max(int(label.sum()), 1)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    accuracy = float((flagged == (label == 1)).mean())
    return (f"n={len(label):5} P {precision:.3f} R {recall:.3f} F1 {f1:.3f} accuracy {accuracy:.3f} "
            f"to humans {(outcome == 1).mean():.1%}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mirror", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--output", type=Path, default=Path("/tmp/outside"),
                        help="where the CSVs go: never inside the repository (seven sets may not be shared)")
    parser.add_argument("--sets", nargs="*", default=list(SETS))
    parser.add_argument("--model", type=Path, default=MODEL_PATH, help="a model file other than the shipped one")
    args = parser.parse_args(argv)
    if args.output.resolve().is_relative_to(Path(__file__).resolve().parents[1]):
        parser.error("--output must lie outside the repository: seven of these sets may not be committed")
    args.output.mkdir(parents=True, exist_ok=True)
    model = load(args.model)
    for name in args.sets:
        rows = examples(args.mirror, name)
        path = args.output / f"{name}.csv"
        with path.open("w", encoding="utf-8", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=["text", "label", "language", "category"], lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        p = model.predict([normalize(r["text"]).text for r in rows])
        outcome = decided(p, model)
        label = np.array([r["label"] for r in rows])
        print(f"{name:18} {figures(label, outcome)}  -> {path}")
        if name in ("hatecheck-en", "seahatecheck-id"):
            by = defaultdict(list)
            for k, r in enumerate(rows):
                by[r["category"]].append(k)
            for functionality, where in sorted(by.items()):
                idx = np.array(where)
                kind = "hateful" if label[idx].mean() > 0.5 else "non-hateful"
                correct = float(((outcome[idx] > 0) == (label[idx] == 1)).mean())
                print(f"    {functionality:28} {kind:11} n={len(idx):4} correct {correct:.1%}")


if __name__ == "__main__":
    main()
