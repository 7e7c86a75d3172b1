"""The lab's fake chat-completions server (lab/fake_llm.py) and its command: loopback only, the
categories a request defines, and the command a demo starts and stops."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import httpx
import pytest
from django.conf import settings

from lab.fake_llm import FakeLlmServer, judge, requested_categories


def test_it_listens_on_loopback_only_and_knows_its_modes():
    with pytest.raises(ValueError, match="loopback only"):
        FakeLlmServer(host="0.0.0.0")
    with pytest.raises(ValueError, match="unknown mode"):
        FakeLlmServer(mode="sarcastic")


def test_it_judges_only_the_categories_a_request_defines_and_quotes_the_text_as_written():
    assert judge("You MORON, I will kill you", ["insult", "threat"])["category"] == "threat"  # the most severe first
    verdict = judge("You MORON, I will kill you", ["insult"])
    assert (verdict["category"], verdict["quote"]) == ("insult", "MORON")
    assert judge("a moronic plan", ["insult"])["category"] == "none"  # whole words only
    prompt = {"messages": [{"role": "system", "content": "Categories:\n- insult: x\n- spam/ads: y\n"}]}
    assert requested_categories(prompt) == ["insult", "spam/ads"]


def test_a_scripted_failure_comes_once_then_its_mode_again():
    with FakeLlmServer() as fake:
        fake.script("error_500")
        body = {"model": "m", "messages": [{"role": "user", "content": "idiot"}]}
        statuses = [httpx.post(f"{fake.url}/v1/chat/completions", json=body).status_code for _ in range(2)]
        assert statuses == [500, 200] and dict(fake.stats) == {"error_500": 1, "good": 1}


def test_the_command_serves_until_it_is_told_to_stop_and_says_what_it_answered():
    process = subprocess.Popen([sys.executable, "manage.py", "run_fake_llm", "--port", "0", "--mode", "fenced"],
                               cwd=settings.BASE_DIR, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               env={**os.environ, "LOG_LEVEL": "WARNING"})
    try:
        line = process.stdout.readline()
        assert line.startswith("Fake LLM server on http://127.0.0.1:") and "PROVIDER_MODEL=fake-safeguard" in line
        url = line.split(" on ", 1)[1].split("/v1/", 1)[0]
        answer = httpx.post(f"{url}/v1/chat/completions",
                            json={"model": "m", "messages": [{"role": "user", "content": "hello"}]}).json()
        assert answer["choices"][0]["message"]["content"].startswith("<think>")
    finally:
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=30)
    assert process.returncode == 0 and json.loads(out.split("stopped; ", 1)[1]) == {"fenced": 1}
