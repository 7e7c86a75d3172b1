"""Serve a fake OpenAI-compatible chat-completions server on loopback for the `llm` provider
(lab/fake_llm.py, docs/providers.md)."""

from __future__ import annotations

import json
import signal
import threading

from django.core.management.base import BaseCommand, CommandError

from lab.fake_llm import MODES, FakeLlmServer


class Command(BaseCommand):
    help = "Run a fake chat-completions server that answers like vLLM, Ollama or llama.cpp, failures included."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1", help="a loopback address")
        parser.add_argument("--port", type=int, default=8720)
        parser.add_argument("--api-key", default="", help="the bearer key it requires (default: none, as a local server)")
        parser.add_argument("--model", default="fake-safeguard", help="the model name its answers carry")
        parser.add_argument("--mode", default="good", choices=MODES, help="how it answers (lab/fake_llm.py)")
        parser.add_argument("--delay-s", type=float, default=2.0, help="how long a slow answer waits (per byte: trickle)")
        parser.add_argument("--retry-after-s", type=int, default=7, help="the Retry-After of a rate_limited answer")

    def handle(self, *args, **o):
        try:
            fake = FakeLlmServer(api_key=o["api_key"], model=o["model"], mode=o["mode"], host=o["host"], port=o["port"],
                                 delay_s=o["delay_s"], retry_after_s=o["retry_after_s"])
        except (ValueError, OSError) as exc:
            raise CommandError(str(exc)) from exc
        stop = threading.Event()
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        self.stdout.write(f"Fake LLM server on {fake.url}/v1/chat/completions (model {fake.model}, mode {fake.mode}): "
                          f"MODERATION_PROVIDER=llm PROVIDER_URL={fake.url} PROVIDER_MODEL={fake.model}")
        self.stdout.flush()
        stop.wait()
        fake.stop()
        self.stdout.write("stopped; " + json.dumps(dict(fake.stats)))
