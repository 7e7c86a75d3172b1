"""The language detector's memory (moderation/language.py): loaded whole and trimmed in a worker,
dropped after a web process's dry run, with the same answers either way."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

from moderation import language

TEXTS = ["you are a complete idiot and everyone knows it", "kamu benar-benar bodoh dan semua orang tahu itu",
         "awak memang bodoh dan semua orang tahu tentang itu", "lol ok", "x" * 300]

# Runs in a fresh interpreter: RSS (MiB) before any detection, after a dry-run style detection
# inside transient(), and after a worker style detection that keeps the models.
PROBE = """
import json, os, sys, django, psutil
django.setup()
from moderation import language
rss = lambda: psutil.Process().memory_info().rss / 2**20
out = {"start": rss()}
with language.transient():
    first = [language.detect(t).as_json() for t in json.loads(sys.argv[1])]
out["after_transient"] = rss()
out["dropped"] = language._detector is None
second = [language.detect(t).as_json() for t in json.loads(sys.argv[1])]
out["resident"] = rss()
out["same"] = first == second
print(json.dumps(out))
"""


@pytest.fixture
def fresh_state(monkeypatch):
    """This process's detector state, put back after the test (other tests keep theirs)."""
    for name in ("_detector", "_resident", "_transient_users"):
        monkeypatch.setattr(language, name, getattr(language, name))
    monkeypatch.setattr(language, "_detector", None)
    monkeypatch.setattr(language, "_resident", False)


def test_a_dry_run_drops_the_models_and_a_worker_keeps_them_with_the_same_answers():
    run = subprocess.run([sys.executable, "-c", PROBE, json.dumps(TEXTS)], capture_output=True, text=True,
                         check=True)
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["same"] and out["dropped"]
    # Loaded, the three languages' models take about 48 MiB (75 untrimmed); dropped, a few.
    assert out["after_transient"] - out["start"] < 15, out
    assert 25 < out["resident"] - out["start"] < 65, out


def test_detections_outside_transient_keep_the_detector(fresh_state):
    language.detect(TEXTS[0])
    kept = language._detector
    with language.transient():
        language.detect(TEXTS[1])
    assert language._detector is kept is not None


def test_the_last_of_overlapping_transient_users_drops_the_models(fresh_state):
    inside, leave = threading.Barrier(2), threading.Event()
    answers, errors = [], []

    def dry_run():
        try:
            with language.transient():
                answers.append(language.detect(TEXTS[0]).language)
                inside.wait(timeout=30)
                leave.wait(timeout=30)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    first = threading.Thread(target=dry_run)
    first.start()
    with language.transient():
        answers.append(language.detect(TEXTS[2]).language)
        inside.wait(timeout=30)
        leave.set()
        first.join(timeout=30)
        assert language._detector is not None  # still in use here
    assert language._detector is None
    assert not errors and sorted(answers) == ["en", "ms"]
