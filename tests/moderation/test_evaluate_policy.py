"""`manage.py evaluate_policy` (moderation/observability/evaluation.py): a policy version run over
labelled texts as production decides them, its figures checked against ones computed by hand, its
input refused row by row, and nothing written."""

from __future__ import annotations

import csv
import json
import re
from io import StringIO

import pytest
from django.apps import apps
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moderation import services
from moderation.models import ModerationPolicy
from moderation.observability import dry_run, evaluation
from moderation.observability.evaluation import EvaluationError, examples_read
from moderation.providers import Accepted, ModerationResult
from moderation.providers.base import ProviderTimeout
from moderation.text import language
from moderation.text.visible import visible_text

LAST_LINE = re.compile(
    r"evaluate_policy: (\d+) texts, not-approved precision (\d\.\d\d|n/a) recall (\d\.\d\d|n/a) F1 (\d\.\d\d|n/a), "
    r"rejected F1 (\d\.\d\d|n/a), to humans (\d{1,3}\.\d)%"
)
# What a terminal would act on, or a page hide, in the printed report (visible.TERMINAL_CONTROLS
# but the report's own line breaks, and the bidirectional and zero-width characters).
RAW_CONTROLS = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200b\u200e\u200f]")

# (text, label, language, category, the scripted provider's score). Single words: too short for
# the detector to be sure of a language, so the model judges every one (moderation.verdicts.
# model_judges). The default policy (v1): rejected from 0.9, a human from 0.5.
ROWS = [
    ("alpha", "1", "en", "insult", 0.95),   # rejected
    ("bravo", "1", "en", "insult", 0.70),   # to humans
    ("charlie", "1", "en", "threat", 0.20),  # approved: missed
    ("delta", "1", "id", "threat", 0.05),   # approved: missed, the most confidently
    ("echo", "0", "en", "", 0.10),          # approved
    ("foxtrot", "0", "en", "", 0.60),       # to humans
    ("golf", "0", "id", "", 0.92),          # rejected: a false alarm
    ("hotel", "0", "id", "", 0.30),         # approved
    ("india", "1", "en", "insult", 0.99),   # rejected
]
# By hand. All: label 1 -> approved 2, to humans 1, rejected 2; label 0 -> 2, 1, 1.
#   not approved: tp 3, fp 2, fn 2 -> precision 3/5, recall 3/5, F1 6/10
#   rejected:     tp 2, fp 1, fn 3 -> precision 2/3, recall 2/5, F1 4/8
#   to humans 2/9 = 22.2%
# en: label 1 -> 1, 1, 2; label 0 -> 1, 1, 0: not approved tp 3 fp 1 fn 1 (3/4 each);
#   rejected tp 2 fp 0 fn 2 (precision 1, recall 1/2, F1 4/6); to humans 2/6.
# id: label 1 -> 1, 0, 0; label 0 -> 1, 0, 1: both kinds tp 0 fp 1 fn 1 (0, 0, 0); to humans 0.
EXPECTED_ALL = {
    "texts": 9, "labelled_1": 5, "labelled_0": 4, "to_humans": 2 / 9, "provider_errors": 0,
    "not_approved": {"precision": 3 / 5, "recall": 3 / 5, "f1": 6 / 10},
    "rejected": {"precision": 2 / 3, "recall": 2 / 5, "f1": 4 / 8},
    "confusion": {"1": {"approved": 2, "to_humans": 1, "rejected": 2}, "0": {"approved": 2, "to_humans": 1, "rejected": 1}},
}


def result(score: float) -> ModerationResult:
    # A provider's category the initial policy sets no thresholds for (tests.helpers.result): the
    # policy's general 0.5 and 0.9 decide, as the rows above say.
    return ModerationResult(model="scripted", flagged=score >= 0.5, categories={"harassment": score >= 0.5},
                            category_scores={"harassment": score})


@pytest.fixture(autouse=True, scope="module")
def detector_in_process():
    """The detector held here, so detect_many detects in this process rather than start a
    subprocess for each evaluation (the same answers: tests/moderation/test_language_memory.py)."""
    language.detector()


def write_csv(path, rows, header=("text", "label", "language", "category")):
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(row[:len(header)] for row in rows)
    return path


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def evaluate(*args) -> str:
    out = StringIO()
    call_command("evaluate_policy", *args, stdout=out)
    return out.getvalue()


def slices(path) -> dict:
    return {(s["by"], s["value"]): s for s in json.loads(path.read_text())["slices"]}


def approx(figures: dict) -> dict:
    return {k: (approx(v) if isinstance(v, dict) else pytest.approx(v) if isinstance(v, float) else v)
            for k, v in figures.items()}


# --- the figures, by hand -------------------------------------------------------------------------

@pytest.mark.django_db
def test_a_small_csv_gives_the_figures_computed_by_hand(scripted, tmp_path):
    scripted.script = [result(score) for *_, score in ROWS]
    out = evaluate("--data", str(write_csv(tmp_path / "set.csv", ROWS)), "--json", str(tmp_path / "out.json"))

    assert out.splitlines()[-1] == ("evaluate_policy: 9 texts, not-approved precision 0.60 recall 0.60 F1 0.60, "
                                    "rejected F1 0.50, to humans 22.2%")
    figures = slices(tmp_path / "out.json")
    assert {k: v for k, v in figures["all", "all"].items() if k in EXPECTED_ALL} == approx(EXPECTED_ALL)
    en, id_ = figures["language", "en"], figures["language", "id"]
    assert (en["texts"], en["not_approved"], en["rejected"], en["to_humans"]) == (
        6, approx({"precision": 0.75, "recall": 0.75, "f1": 0.75}),
        approx({"precision": 1.0, "recall": 0.5, "f1": 4 / 6}), pytest.approx(2 / 6))
    assert (id_["not_approved"], id_["rejected"], id_["to_humans"]) == (
        {"precision": 0.0, "recall": 0.0, "f1": 0.0}, {"precision": 0.0, "recall": 0.0, "f1": 0.0}, 0.0)
    assert set(figures) == {("all", "all"), ("language", "en"), ("language", "id"), ("category", "(none)"),
                            ("category", "insult"), ("category", "threat")}
    # Undefined where no text is labelled 1 (precision: none was held either).
    assert figures["category", "(none)"]["not_approved"] == {"precision": 0.0, "recall": None, "f1": 0.0}
    assert figures["category", "insult"]["not_approved"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0}
    # The worst misses: the most confidently approved first; the false alarms, the rejected first
    # (a benign text sent to a human is one as well: "not approved" counts it).
    assert [(m["row"], m["score"], m["text"]) for m in figures["all", "all"]["missed"]] == [
        (4, 0.05, "delta"), (3, 0.2, "charlie")]
    assert [(m["row"], m["outcome"]) for m in figures["all", "all"]["false_alarms"]] == [
        (7, "rejected"), (6, "manual_review")]
    assert "row 7  rejected  score 0.920  golf" in out and "row 6  manual_review  score 0.600  foxtrot" in out
    assert "== language en: 6 texts, 4 labelled 1, 2 labelled 0" in out
    assert "   not approved  precision 0.75  recall 0.75  F1 0.75" in out
    assert re.search(r"label 1 +2 +1 +2\n +label 0 +2 +1 +1\n", out), out
    assert "row 4  score 0.050  delta" in out


@pytest.mark.django_db
def test_a_small_jsonl_gives_the_figures_computed_by_hand(scripted, tmp_path):
    """Labels as JSON booleans, numbers and strings; a row without a language is in "(none)"."""
    records = [{"text": "kilo", "label": True, "language": "en"}, {"text": "lima", "label": 1, "language": "en"},
               {"text": "mike", "label": "false", "language": "en"}, {"text": "november", "label": 0},
               {"text": "oscar", "label": "TRUE"}]
    scripted.script = [result(s) for s in (0.97, 0.1, 0.55, 0.2, 0.6)]
    out = evaluate("--data", str(write_jsonl(tmp_path / "set.jsonl", records)), "--json", str(tmp_path / "o.json"))
    # label 1: kilo rejected, lima approved, oscar to humans; label 0: mike to humans, november approved.
    # not approved tp 2 fp 1 fn 1 -> 2/3, 2/3, 4/6; rejected tp 1 fp 0 fn 2 -> F1 2/4; to humans 2/5.
    assert out.splitlines()[-1] == ("evaluate_policy: 5 texts, not-approved precision 0.67 recall 0.67 F1 0.67, "
                                    "rejected F1 0.50, to humans 40.0%")
    figures = slices(tmp_path / "o.json")
    assert figures["all", "all"]["confusion"] == {"1": {"approved": 1, "to_humans": 1, "rejected": 1},
                                                  "0": {"approved": 1, "to_humans": 1, "rejected": 0}}
    assert figures["language", "(none)"]["confusion"] == {"1": {"approved": 0, "to_humans": 1, "rejected": 0},
                                                          "0": {"approved": 1, "to_humans": 0, "rejected": 0}}
    assert set(figures) == {("all", "all"), ("language", "en"), ("language", "(none)")}  # no category column


@pytest.mark.django_db
def test_without_language_and_category_columns_there_is_one_slice_all(scripted, tmp_path):
    scripted.script = [result(0.95), result(0.1)]
    out = evaluate("--data", str(write_csv(tmp_path / "s.csv", [("a", "1"), ("b", "0")], header=("text", "label"))))
    assert [line for line in out.splitlines() if line.startswith("== ")] == ["== all: 2 texts, 1 labelled 1, 1 labelled 0"]
    assert LAST_LINE.fullmatch(out.splitlines()[-1]).groups() == ("2", "1.00", "1.00", "1.00", "1.00", "0.0")


@pytest.mark.django_db
def test_the_rules_decide_beside_the_model_as_in_production(scripted, tmp_path):
    """A policy's reject rule rejects what the model approves: the verdict is `decide`'s."""
    services.policy_publish(reject_threshold=0.9, review_threshold=0.5, term_lists=[
        {"category": "insult", "action": "reject", "language": "", "terms": ["bodoh"]}])
    scripted.script = [result(0.01), result(0.01)]
    evaluate("--data", str(write_csv(tmp_path / "s.csv", [("dasar bodoh", "1"), ("dasar baik", "0")],
                                     header=("text", "label"))), "--json", str(tmp_path / "o.json"))
    figures = slices(tmp_path / "o.json")["all", "all"]
    assert figures["confusion"]["1"]["rejected"] == 1 and figures["confusion"]["0"]["approved"] == 1
    assert figures["rejected"]["f1"] == 1.0


@pytest.mark.django_db
def test_a_provider_error_counts_as_sent_to_a_human(scripted, tmp_path):
    scripted.script = [ProviderTimeout("took too long"), result(0.1)]
    out = evaluate("--data", str(write_csv(tmp_path / "s.csv", [("a", "1"), ("b", "0")], header=("text", "label"))))
    assert "provider errors: 1 (counted as sent to humans)" in out
    assert out.splitlines()[-1].endswith("to humans 50.0%")


# --- which policy, which provider ---------------------------------------------------------------

@pytest.mark.django_db
def test_a_given_version_is_evaluated_and_the_active_one_stays(scripted, tmp_path):
    first = services.policy_active()
    services.policy_publish(reject_threshold=0.3, review_threshold=0.2)  # v2, active: rejects 0.5
    data = str(write_csv(tmp_path / "s.csv", [("a", "1"), ("b", "0")], header=("text", "label")))

    scripted.script = [result(0.5), result(0.1)]
    out_old = evaluate("--data", data, "--policy", str(first.version))
    scripted.script = [result(0.5), result(0.1)]
    out_new = evaluate("--data", data)

    assert out_old.startswith(f"policy v{first.version}, provider scripted")
    assert out_old.splitlines()[-1].endswith("rejected F1 0.00, to humans 50.0%")  # v1: 0.5 goes to a human
    assert out_new.splitlines()[-1].endswith("rejected F1 1.00, to humans 0.0%")  # v2: 0.5 is rejected
    assert services.policy_active().version == first.version + 1
    assert ModerationPolicy.objects.count() == 2


@pytest.mark.django_db
def test_an_unknown_version_is_refused(scripted, tmp_path):
    data = str(write_csv(tmp_path / "s.csv", [("a", "1")], header=("text", "label")))
    with pytest.raises(CommandError, match="no policy version 7 \\(the newest is 1\\)"):
        evaluate("--data", data, "--policy", "7")
    assert scripted.calls == []


@pytest.mark.django_db
def test_the_webhook_provider_is_refused_before_any_text_leaves(tmp_path, monkeypatch):
    """The tests' MODERATION_PROVIDER is webhook: it answers by callback, so the evaluation says
    to use the local model, having sent nothing."""
    from moderation.providers import http

    monkeypatch.setattr(http, "post_json", lambda *a, **k: pytest.fail("a text was sent to the webhook provider"))
    data = str(write_csv(tmp_path / "s.csv", [("a", "1")], header=("text", "label")))
    with pytest.raises(CommandError, match="answers by callback.*--provider local"):
        evaluate("--data", data, "--json", str(tmp_path / "o.json"))
    assert not (tmp_path / "o.json").exists()


@pytest.mark.django_db
def test_a_provider_that_accepts_to_answer_later_is_a_clear_error(scripted, tmp_path):
    scripted.script = [result(0.1), Accepted(provider_request_id="op-1")]
    data = str(write_csv(tmp_path / "s.csv", [("a", "1"), ("b", "0")], header=("text", "label")))
    with pytest.raises(CommandError, match="accepted row 2 to answer later"):
        evaluate("--data", data)


@pytest.mark.django_db
def test_the_local_model_judges_the_texts_in_batches_and_their_languages_too(settings, tmp_path, monkeypatch):
    from moderation.providers.local import LocalProvider

    settings.MODERATION_PROVIDER = "webhook"
    monkeypatch.setattr(dry_run, "MODEL_CALL_TEXTS", 40)
    monkeypatch.setattr(evaluation, "DETECT_TEXTS", 30)
    calls, detected = [], []
    real, detect = LocalProvider.moderate_many, evaluation.detect_many
    monkeypatch.setattr(LocalProvider, "moderate_many", lambda self, inputs: calls.append(len(inputs)) or real(self, inputs))
    monkeypatch.setattr(evaluation, "detect_many", lambda texts: detected.append(len(texts)) or detect(texts))
    rows = [(f"you are a stupid idiot number {i}" if i % 2 else f"what a lovely day number {i}", str(i % 2))
            for i in range(100)]
    out = evaluate("--data", str(write_csv(tmp_path / "s.csv", rows, header=("text", "label"))), "--provider", "local")
    assert calls == [40, 40, 20] and detected == [30, 30, 30, 10]
    assert LAST_LINE.fullmatch(out.splitlines()[-1]).group(1) == "100"


# --- input refused, row by row -----------------------------------------------------------------

@pytest.mark.parametrize("value,label", [("1", True), ("0", False), ("true", True), ("FALSE", False), (" True ", True)])
def test_a_label_reads_as_1_0_true_or_false(tmp_path, value, label):
    [example] = examples_read(write_csv(tmp_path / "s.csv", [("a", value)], header=("text", "label")))
    assert example.label is label


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["yes", "2", "", "1.0", "-1", "t"])
def test_any_other_label_is_refused_with_its_row(scripted, tmp_path, value):
    data = write_csv(tmp_path / "s.csv", [("a", "1"), ("b", "0"), ("c", value)], header=("text", "label"))
    with pytest.raises(CommandError, match=f"row 3 \\(line 4\\): the label '{re.escape(value)}' is not 1, 0, true or false"):
        evaluate("--data", str(data), "--json", str(tmp_path / "o.json"))
    assert scripted.calls == [] and not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("value", [2, 1.0, None, [1], "maybe"])
def test_a_jsonl_label_other_than_1_0_true_false_is_refused(tmp_path, value):
    data = write_jsonl(tmp_path / "s.jsonl", [{"text": "a", "label": 1}, {"text": "b", "label": value}])
    with pytest.raises(EvaluationError, match="row 2 \\(line 2\\): the label .* is not 1, 0, true or false"):
        examples_read(data)


@pytest.mark.parametrize("name,content,message", [
    ("s.csv", b"text,language\na,en\n", "the header has no 'label' column \\(it has 'text', 'language'\\)"),
    ("s.csv", b"", "empty, not even a header"),
    ("s.csv", b"text,label\n", "no labelled texts in it"),
    ("s.csv", b"text,label\na,1\nb,0,extra\n", "row 2 \\(line 3\\) has 3 values for the header's 2 columns"),
    ("s.csv", b"text,label\na,1\nb,0\n\xff\xfe,1\n", "row 3 \\(line 4\\) is not UTF-8 \\(byte 0xff\\)"),
    ("s.csv", b"text,label\n\"multi\nline\",1\nok,0\nbad \xc3(,1\n", "row 3 \\(line 5\\) is not UTF-8"),
    ("s.csv", b"te\xffxt,label\n", "the header \\(line 1\\) is not UTF-8"),
    ("s.jsonl", b'{"text": "a", "label": 1}\n\n{"text": "b"}\n', "row 2 \\(line 3\\) has no 'label'"),
    ("s.jsonl", b'{"text": "a", "label": 1}\n{"text": "b", "label": 0\n', "row 2 \\(line 2\\) is not JSON"),
    ("s.jsonl", b'[1, 2]\n', "row 1 \\(line 1\\) is not a JSON object"),
    ("s.jsonl", b'{"text": 5, "label": 1}\n', "row 1 \\(line 1\\): the text is not a string"),
    ("s.jsonl", b'{"text": "a", "label": 1, "language": 3}\n', "row 1 \\(line 1\\): the language is not a string"),
    ("s.jsonl", b'{"text": "a", "label": 1}\n{"text": "\xe9", "label": 0}\n', "row 2 \\(line 2\\) is not UTF-8 \\(byte 0xe9\\)"),
    ("s.jsonl", '{"text": "a\u2028b\x85c", "label": 1}\n{"text": "'.encode() + b'\xe9", "label": 0}\n',
     "row 2 \\(line 2\\) is not UTF-8"),  # a line separator inside a text starts no row
    ("s.jsonl", b"\n \n", "no labelled texts in it"),
])
def test_a_bad_file_is_refused_saying_where(tmp_path, name, content, message):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(EvaluationError, match=message):
        examples_read(tmp_path / name)


def test_a_file_of_another_kind_or_missing_is_refused(tmp_path):
    (tmp_path / "s.txt").write_text("text,label\na,1\n")
    with pytest.raises(EvaluationError, match="give a .csv or a .jsonl file"):
        examples_read(tmp_path / "s.txt")
    with pytest.raises(EvaluationError, match="cannot be read"):
        examples_read(tmp_path / "absent.csv")


# --- nothing written --------------------------------------------------------------------------------

def _row_counts() -> dict[str, int]:
    models = [m for label in ("moderation", "audit", "callbacks", "django_q") for m in apps.get_app_config(label).get_models()]
    return {m._meta.label: m._base_manager.count() for m in models}


@pytest.mark.django_db
def test_an_evaluation_writes_nothing(scripted, tmp_path, api_client, django_capture_on_commit_callbacks):
    from tests.helpers import submit

    submit(api_client, text="a review that exists before")  # tables with rows in them
    before = _row_counts()
    scripted.script = [result(score) for *_, score in ROWS]
    data = str(write_csv(tmp_path / "set.csv", ROWS))
    with CaptureQueriesContext(connection) as queries, django_capture_on_commit_callbacks() as callbacks:
        evaluate("--data", data)
    assert _row_counts() == before
    assert len(before) > 40 and sum(before.values()) > 0  # every table counted, some with rows
    statements = [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]
    assert statements and all(sql.lstrip().upper().startswith("SELECT") for sql in statements), statements
    assert callbacks == []


# --- every text -----------------------------------------------------------------------------------

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=60) | st.lists(st.sampled_from(
    ["\u202e", "\u2066", "\u200b", "\u200d", "\x1b[31m", "\r\n", "\n", "\t", "\x00", "\u2028", "🏳️‍🌈", "e\u0301",
     "ｉｄｉｏｔ", "idiot", ",", '"', "'"]), max_size=12).map("".join)
FEW = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.django_db
@FEW
@given(texts=st.lists(TEXT, min_size=1, max_size=6), as_csv=st.booleans())
def test_any_text_is_evaluated_and_printed_with_nothing_hidden(scripted, tmp_path_factory, texts, as_csv):
    """Every text labelled 1 and approved: each is printed among the misses, shown with its hidden
    characters and controls as code points, and nothing breaks."""
    if services.policy_active().model_languages:  # the model judges every language: each text is a miss
        services.policy_publish(reject_threshold=0.9, review_threshold=0.5, model_languages=[])
    folder = tmp_path_factory.mktemp("any")
    rows = [(text, "1") for text in texts]
    data = (write_csv(folder / "s.csv", rows, header=("text", "label")) if as_csv
            else write_jsonl(folder / "s.jsonl", [{"text": t, "label": 1} for t in texts]))
    scripted.script = [result(0.01) for _ in texts]
    out = evaluate("--data", str(data))
    assert LAST_LINE.fullmatch(out.splitlines()[-1]).groups() == (str(len(texts)), "n/a", "0.00", "0.00", "0.00", "0.0")
    assert not RAW_CONTROLS.search(out.replace(str(data), "")), repr(out)
    missed = [line for line in out.splitlines() if line.startswith("     row ")]
    assert len(missed) == min(len(texts), 10)


@given(text=TEXT, limit=st.integers(min_value=0, max_value=30))
def test_a_text_shown_shortened_hides_nothing_and_keeps_its_start(text, limit):
    shown = visible_text(text, limit=limit)
    assert not RAW_CONTROLS.search(shown) and "\n" not in shown, repr(shown)
    assert visible_text(text).startswith(shown.removesuffix("…"))


def test_a_text_shown_marks_controls_and_hidden_characters():
    assert visible_text("ok\x1b[2J\r\nid\u200biot \u202eesrever") == "ok⟨U+001B⟩[2J⟨U+000D⟩⟨U+000A⟩id⟨U+200B⟩iot ⟨U+202E⟩esrever"
    assert visible_text("abcdef", limit=3) == "abc…"
    assert visible_text("ab\u200bcd", limit=3) == "ab⟨U+200B⟩…"  # a marker is never cut
    assert visible_text("👩‍💻 ok", limit=10) == "👩‍💻 ok"  # an emoji's joiner is how it is written
