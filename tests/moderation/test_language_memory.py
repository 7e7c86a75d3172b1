"""The language detector's memory (moderation/text/language.py): loaded whole and trimmed where it
stays (a worker), never loaded by a web process's dry run, with the same answers either way."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from moderation.text import language

TEXTS = ["you are a complete idiot and everyone knows it", "kamu benar-benar bodoh dan semua orang tahu itu",
         "awak memang bodoh dan semua orang tahu tentang itu", "lol ok", "x" * 300, "",
         "du bist ein kompletter Idiot und alle wissen es " * 60]

# Runs in a fresh interpreter, as a web worker would: RSS (MiB) before any detection, after a
# batch through detect_many, and after a worker-style detection that keeps the models.
PROBE = """
import json, sys, django, psutil
django.setup()
from moderation.text import language
rss = lambda: psutil.Process().memory_info().rss / 2**20
texts = json.loads(sys.argv[1])
out = {"start": rss()}
batch = [d.as_json() for d in language.detect_many(texts)]
out["after_batch"] = rss()
out["loaded_here"] = language._detector is not None or "lingua" in sys.modules
kept = [language.detect(t).as_json() for t in texts]
out["resident"] = rss()
out["same"] = batch == kept
print(json.dumps(out))
"""


def _probe() -> dict:
    run = subprocess.run([sys.executable, "-c", PROBE, json.dumps(TEXTS)], capture_output=True, text=True,
                         check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_a_batch_detection_leaves_the_process_without_the_models_and_answers_as_detect_does():
    out = _probe()
    assert out["same"], out
    assert not out["loaded_here"], out
    assert out["after_batch"] - out["start"] < 10, out


def test_a_detector_that_stays_is_trimmed_after_loading():
    out = _probe()
    # Held, the three languages' models take about 48 MiB; untrimmed, lingua's scratch adds ~27.
    assert 25 < out["resident"] - out["start"] < 62, out


def test_a_process_holding_the_detector_detects_a_batch_itself(monkeypatch):
    one_by_one = [language.detect(t) for t in TEXTS]  # this process now holds the detector
    monkeypatch.setattr(language.subprocess, "run", None)  # a subprocess would fail loudly
    assert language.detect_many(TEXTS) == one_by_one


def test_a_failed_subprocess_is_a_clear_error(monkeypatch, settings):
    monkeypatch.setattr(language, "_detector", None)
    settings.MODERATION_LANGUAGES = ["en", "xx"]
    with pytest.raises(RuntimeError, match="'xx' is not a language the detector knows"):
        language.detect_many(["hello there friend"])
