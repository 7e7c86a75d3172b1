"""A policy measured on labelled texts (`manage.py evaluate_policy`): what it decides of each, as
production would, set against what a person said it should be.

A labelled set is a CSV or JSONL file of texts, each with a `label` (1 or true: it should not be
approved; 0 or false: it should), and optionally a `language` and a `category` to slice the
figures by. Each text is judged as a submitted text is: its language detected (`detect_many`),
the provider's scores (`model_results`, the dry run's batched call: moderation/observability/
dry_run.py), then the one decision function, `moderation.verdicts.decide` (docs/design.md,
"Layers"). Nothing is written: no review, decision, notification or transition exists for these
texts; a provider's error for a text counts as a text sent to a human, where production sends it
once its retries are spent.

The figures (`evaluation_figures`), for every text ("all") and per language and per category
when the file has those columns: precision, recall and F1 of "not approved" (rejected or sent to
a human: the policy did not let it through) and of "rejected" alone, the share sent to humans,
the confusion of labels and outcomes, and the worst misses each way.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from moderation.models import ModerationPolicy, ReviewStatus, RuleAction
from moderation.observability.dry_run import model_results
from moderation.providers import Accepted, ProviderError, get_provider, provider_answers_inline
from moderation.text.language import detect_many
from moderation.text.visible import visible_text
from moderation.verdicts import decide

LABELS = {"1": True, "true": True, "0": False, "false": False}
REQUIRED = ("text", "label")
SLICED_BY = ("language", "category")
ALL = "all"
NONE = "(none)"  # the slice of the rows that leave a language or category empty
WORST = 10  # misses shown each way, per slice
SHOWN_CHARS = 100  # of a miss's text
# Texts per language detection: each batch is one subprocess of detect_many, which must answer
# within its timeout (20,000 short texts take some 10 s).
DETECT_TEXTS = 20_000
# (outcome, its name in the figures): the confusion's columns, in order.
OUTCOMES = ((ReviewStatus.APPROVED, "approved"), (ReviewStatus.MANUAL_REVIEW, "to_humans"),
            (ReviewStatus.REJECTED, "rejected"))


class EvaluationError(Exception):
    """The labelled file or the provider cannot be evaluated: the message says why (and, for a
    file, which row). Nothing has been judged or written."""


@dataclass(frozen=True)
class Example:
    row: int  # the file's n-th labelled text, from 1 (a CSV's header is not a row)
    line: int  # the file's line it ends on, from 1
    text: str
    label: bool  # True: it should not be approved
    language: str | None = None  # None: the file has no such column
    category: str | None = None


@dataclass(frozen=True)
class Judged:
    example: Example
    outcome: ReviewStatus
    score: float | None  # the verdict's top category score (None: the model's was not used)
    rules: tuple[str, ...] = ()  # the rules that matched (not the allow rules)
    error: str = ""  # the provider's error: the text counts as sent to a human
    category: str = ""  # the category that decided (the verdict's), "" for an approval


# --- reading a labelled file --------------------------------------------------------------------

def examples_read(path: Path) -> list[Example]:
    """The labelled texts of a .csv (a header naming the columns) or .jsonl (one object per
    line) file, UTF-8. EvaluationError, naming the row, for anything it cannot read: no such
    column, a label other than 1/0/true/false, no rows, bytes that are not UTF-8."""
    path = Path(path)
    kind = path.suffix.lower()
    if kind not in (".csv", ".jsonl", ".ndjson"):
        raise EvaluationError(f"{path}: give a .csv or a .jsonl file")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise EvaluationError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise EvaluationError(f"{path}: {_undecodable(raw, exc, csv_file=kind == '.csv')} is not UTF-8 "
                              f"(byte 0x{raw[exc.start]:02x})") from None
    records = _csv_records(path, text) if kind == ".csv" else _jsonl_records(path, text)
    examples = [_example(path, row, line, record) for row, line, record in records]
    if not examples:
        raise EvaluationError(f"{path}: no labelled texts in it")
    # A JSONL row without a language (or category) that others have is in the "(none)" slice.
    for name in SLICED_BY:
        if any(getattr(example, name) is not None for example in examples):
            examples = [replace(e, **{name: NONE}) if getattr(e, name) is None else e for e in examples]
    return examples


def _undecodable(raw: bytes, exc: UnicodeDecodeError, *, csv_file: bool) -> str:
    """Where a file stops being UTF-8: "row N (line L)"."""
    line_start = raw.rfind(b"\n", 0, exc.start) + 1
    line = raw.count(b"\n", 0, exc.start) + 1
    before = raw[:line_start].decode("utf-8-sig")  # every byte before the failing one decoded
    if csv_file:
        row = sum(1 for values in csv.reader(io.StringIO(before, newline="")) if values)  # the header, then each row
        return f"row {row} (line {line})" if row else f"the header (line {line})"
    # Rows split as _jsonl_records splits them: at "\n" only (a JSON string may hold U+2028).
    return f"row {sum(1 for text in before.split(chr(10)) if text.strip()) + 1} (line {line})"


def _csv_records(path: Path, text: str):
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [name.strip() for name in next(reader)]
    except StopIteration:
        raise EvaluationError(f"{path}: empty, not even a header") from None
    except csv.Error as exc:
        raise EvaluationError(f"{path}: the header (line 1) is not CSV: {exc}") from None
    missing = [name for name in REQUIRED if name not in header]
    if missing:
        raise EvaluationError(f"{path}: the header has no {' or '.join(repr(m) for m in missing)} column "
                              f"(it has {', '.join(repr(visible_text(h, limit=30)) for h in header) or 'none'})")
    row = 0
    while True:
        try:
            values = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise EvaluationError(f"{path}: row {row + 1} (line {reader.line_num}) is not CSV: {exc}") from None
        if not values:
            continue  # a blank line
        row += 1
        if len(values) != len(header):
            raise EvaluationError(f"{path}: row {row} (line {reader.line_num}) has {len(values)} values "
                                  f"for the header's {len(header)} columns")
        yield row, reader.line_num, dict(zip(header, values, strict=True))


def _jsonl_records(path: Path, text: str):
    row = 0
    for line, content in enumerate(text.split("\n"), start=1):
        if not content.strip():
            continue
        row += 1
        try:
            record = json.loads(content)
        except ValueError as exc:
            raise EvaluationError(f"{path}: row {row} (line {line}) is not JSON: {exc}") from None
        if not isinstance(record, dict):
            raise EvaluationError(f"{path}: row {row} (line {line}) is not a JSON object")
        yield row, line, record


def _example(path: Path, row: int, line: int, record: dict) -> Example:
    where = f"{path}: row {row} (line {line})"
    for name in REQUIRED:
        if name not in record:
            raise EvaluationError(f"{where} has no {name!r}")
    if not isinstance(record["text"], str):
        raise EvaluationError(f"{where}: the text is not a string")
    sliced = {}
    for name in SLICED_BY:
        value = record.get(name)
        if value is not None and not isinstance(value, str):
            raise EvaluationError(f"{where}: the {name} is not a string")
        sliced[name] = None if name not in record else (value or "").strip() or NONE
    return Example(row=row, line=line, text=record["text"], label=_label(record["label"], where), **sliced)


def _label(value, where: str) -> bool:
    """1/0/true/false, as a string (any case, spaces around) or a JSON number or boolean."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in LABELS:
        return LABELS[value.strip().lower()]
    shown = visible_text(value if isinstance(value, str) else json.dumps(value), limit=30)
    raise EvaluationError(f"{where}: the label {shown!r} is not 1, 0, true or false")


# --- judging ------------------------------------------------------------------------------------

def examples_judge(examples: list[Example], *, policy: ModerationPolicy, provider_name: str) -> list[Judged]:
    """What `policy` decides of each text with the provider `provider_name`: the language
    detected as a worker detects it, the provider asked in batches (`model_results`), then
    `decide`. EvaluationError when the provider cannot answer here: unknown, or one that calls
    back (the webhook protocol's: evaluate with the local model instead). Writes nothing."""
    provider = inline_provider(provider_name)
    texts = [example.text for example in examples]
    answered = Answered(detections=examples_detect(examples),
                        answers=model_results(texts, provider=provider, policy=policy))
    return examples_decide(examples, answered, policy=policy, provider_name=provider_name)


@dataclass(frozen=True)
class Answered:
    """The languages detected and the provider's answers for a list of examples, in order: what
    any number of policy versions then decide from (`examples_decide`) without asking again."""

    detections: list
    answers: list


def inline_provider(provider_name: str):
    """The provider `provider_name`, if it answers in the call (EvaluationError otherwise)."""
    try:
        provider = get_provider(provider_name)
    except LookupError as exc:
        raise EvaluationError(str(exc)) from None
    if not provider_answers_inline(provider):
        raise EvaluationError(f"the {provider_name} provider answers by callback, not in the call: it cannot "
                              "judge texts outside a review; evaluate with --provider local")
    return provider


def examples_detect(examples: list[Example]) -> list:
    """Each text's language, detected as a worker detects it (in batches of DETECT_TEXTS)."""
    texts = [example.text for example in examples]
    return [detection for start in range(0, len(texts), DETECT_TEXTS)
            for detection in detect_many(texts[start:start + DETECT_TEXTS])]


def examples_decide(examples: list[Example], answered: Answered, *, policy: ModerationPolicy,
                    provider_name: str) -> list[Judged]:
    """What `policy` decides of each example from its detected language and provider answer."""
    judged = []
    for example, detection, answer in zip(examples, answered.detections, answered.answers, strict=True):
        if isinstance(answer, Accepted):
            raise EvaluationError(f"the {provider_name} provider accepted row {example.row} to answer later "
                                  "(by callback): evaluate with --provider local")
        if isinstance(answer, ProviderError):
            judged.append(Judged(example, ReviewStatus.MANUAL_REVIEW, None, error=f"{answer.kind}: {answer}"))
            continue
        verdict = decide(policy, answer, text=example.text, detection=detection)
        rules = tuple(dict.fromkeys(m.rule for m in verdict.rule_matches if m.action != RuleAction.ALLOW))
        judged.append(Judged(example, ReviewStatus(verdict.label), verdict.score, rules,
                             category=_deciding_category(verdict, answer)))
    return judged


def _deciding_category(verdict, answer) -> str:
    """The category a verdict that holds the text back acts on: its first rule's that rejects or
    asks for review, else the highest-scoring one; "" for an approval."""
    if verdict.label == ReviewStatus.APPROVED:
        return ""
    for match in verdict.rule_matches:
        if match.action != RuleAction.ALLOW:
            return match.category
    scores = verdict.scores if verdict.scores is not None else answer.category_scores
    return max(scores, key=lambda name: (scores[name], name)) if scores else ""


# --- the figures ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Scores:
    """Precision, recall and F1 of one kind of "positive" outcome; None where undefined (no text
    had that outcome, or none was labelled 1)."""

    precision: float | None
    recall: float | None
    f1: float | None

    @classmethod
    def of(cls, *, true_positives: int, false_positives: int, false_negatives: int) -> Scores:
        tp, fp, fn = true_positives, false_positives, false_negatives
        return cls(precision=tp / (tp + fp) if tp + fp else None, recall=tp / (tp + fn) if tp + fn else None,
                   f1=2 * tp / (2 * tp + fp + fn) if tp + fp + fn else None)


@dataclass(frozen=True)
class SliceFigures:
    by: str  # "all", "language" or "category"
    value: str  # the language or category ("all" for every text)
    texts: int
    labelled_1: int
    confusion: dict[str, dict[str, int]]  # "1"/"0" -> OUTCOMES' names -> texts
    not_approved: Scores
    rejected: Scores
    to_humans: float  # the share of the texts sent to a human
    errors: int  # texts the provider failed on (counted as sent to humans)
    missed: tuple[Judged, ...] = field(default=())  # labelled 1, approved: most confidently first
    false_alarms: tuple[Judged, ...] = field(default=())  # labelled 0, not approved: the rejected first

    @property
    def name(self) -> str:
        return ALL if self.by == ALL else f"{self.by} {self.value}"


def evaluation_figures(judged: list[Judged]) -> list[SliceFigures]:
    """The figures for every text, then per language, then per category (for a file with those
    columns), the slices of each in alphabetical order."""
    slices = [slice_figures(ALL, ALL, judged)]
    for by in SLICED_BY:
        values = sorted({getattr(j.example, by) for j in judged} - {None})
        slices += [slice_figures(by, value, [j for j in judged if getattr(j.example, by) == value]) for value in values]
    return slices


def slice_figures(by: str, value: str, judged: list[Judged]) -> SliceFigures:
    confusion = {label: {name: 0 for _, name in OUTCOMES} for label in ("1", "0")}
    names = dict(OUTCOMES)
    for j in judged:
        confusion["1" if j.example.label else "0"][names[j.outcome]] += 1
    positive, negative = confusion["1"], confusion["0"]
    held = positive["to_humans"] + positive["rejected"]  # labelled 1, not approved
    missed = [j for j in judged if j.example.label and j.outcome == ReviewStatus.APPROVED]
    alarms = [j for j in judged if not j.example.label and j.outcome != ReviewStatus.APPROVED]
    return SliceFigures(
        by=by, value=value, texts=len(judged), labelled_1=sum(positive.values()), confusion=confusion,
        not_approved=Scores.of(true_positives=held, false_positives=negative["to_humans"] + negative["rejected"],
                               false_negatives=positive["approved"]),
        rejected=Scores.of(true_positives=positive["rejected"], false_positives=negative["rejected"],
                           false_negatives=positive["approved"] + positive["to_humans"]),
        to_humans=(positive["to_humans"] + negative["to_humans"]) / len(judged) if judged else 0.0,
        errors=sum(1 for j in judged if j.error),
        # "Most confidently approved": the lowest score first; a text the model did not judge
        # (its language, no score) before any. The false alarms (a benign text sent to a human is
        # one too: "not approved" counts it): the rejected first, each kind by the highest score,
        # those a rule decided without the model's score after.
        missed=tuple(sorted(missed, key=lambda j: (j.score is not None, j.score or 0.0, j.example.row))[:WORST]),
        false_alarms=tuple(sorted(alarms, key=lambda j: (j.outcome != ReviewStatus.REJECTED, j.score is None,
                                                         -(j.score or 0.0), j.example.row))[:WORST]),
    )


# --- how the figures are shown ------------------------------------------------------------------

def figure(value: float | None) -> str:
    """A precision, recall or F1 as the report prints it: two decimals, "n/a" when undefined."""
    return "n/a" if value is None else f"{value:.2f}"


def summary_line(figures: SliceFigures) -> str:
    """The report's last line (docs/operations.md, "Measuring a policy"), for every text."""
    na, rej = figures.not_approved, figures.rejected
    return (f"evaluate_policy: {figures.texts} texts, not-approved precision {figure(na.precision)} "
            f"recall {figure(na.recall)} F1 {figure(na.f1)}, rejected F1 {figure(rej.f1)}, "
            f"to humans {figures.to_humans * 100:.1f}%")


def report_lines(figures: SliceFigures) -> list[str]:
    """One slice's figures as text: every text of it shown through `visible_text`."""
    na, rej, confusion = figures.not_approved, figures.rejected, figures.confusion
    lines = [
        f"== {figures.name}: {figures.texts} texts, {figures.labelled_1} labelled 1, "
        f"{figures.texts - figures.labelled_1} labelled 0",
        f"   not approved  precision {figure(na.precision)}  recall {figure(na.recall)}  F1 {figure(na.f1)}",
        f"   rejected      precision {figure(rej.precision)}  recall {figure(rej.recall)}  F1 {figure(rej.f1)}",
        f"   to humans     {figures.to_humans * 100:.1f}%",
        f"   {'':9}{'approved':>10}{'to humans':>11}{'rejected':>10}",
        *(f"   label {label}  {confusion[label]['approved']:>10}{confusion[label]['to_humans']:>11}"
          f"{confusion[label]['rejected']:>10}" for label in ("1", "0")),
    ]
    if figures.errors:
        lines.append(f"   provider errors: {figures.errors} (counted as sent to humans)")
    if figures.missed:
        lines.append("   missed (labelled 1, approved), most confidently approved first:")
        lines += [f"     {miss_line(j)}" for j in figures.missed]
    if figures.false_alarms:
        lines.append("   false alarms (labelled 0, not approved), the rejected first, highest score first:")
        lines += [f"     {miss_line(j, outcome=True)}" for j in figures.false_alarms]
    return lines


def miss_line(judged: Judged, *, outcome: bool = False) -> str:
    score = "no score" if judged.score is None else f"score {judged.score:.3f}"
    rules = f"  rules {', '.join(judged.rules)}" if judged.rules else ""
    shown = f"{judged.outcome}  " if outcome else ""
    return f"row {judged.example.row}  {shown}{score}{rules}  {visible_text(judged.example.text, limit=SHOWN_CHARS)}"


def figures_json(figures: list[SliceFigures], *, policy: ModerationPolicy, provider_name: str, data: str) -> dict:
    """The figures as `--json` writes them: one object per slice."""
    return {"policy_version": policy.version, "provider": provider_name, "data": data,
            "slices": [_slice_json(f) for f in figures]}


def _slice_json(figures: SliceFigures) -> dict:
    def scores(s: Scores) -> dict:
        return {"precision": s.precision, "recall": s.recall, "f1": s.f1}

    def miss(j: Judged) -> dict:
        return {"row": j.example.row, "score": j.score, "outcome": j.outcome.value, "rules": list(j.rules),
                "language": j.example.language, "category": j.example.category,
                "text": visible_text(j.example.text, limit=SHOWN_CHARS)}

    return {"by": figures.by, "value": figures.value, "texts": figures.texts, "labelled_1": figures.labelled_1,
            "labelled_0": figures.texts - figures.labelled_1, "not_approved": scores(figures.not_approved),
            "rejected": scores(figures.rejected), "to_humans": figures.to_humans, "provider_errors": figures.errors,
            "confusion": figures.confusion, "missed": [miss(j) for j in figures.missed],
            "false_alarms": [miss(j) for j in figures.false_alarms]}
