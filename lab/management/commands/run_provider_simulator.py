"""Serve the `webhook` provider protocol with fault injection (see moderation/simulator.py)."""

from __future__ import annotations

import json
import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from lab.simulator import Faults, ProviderSimulator


class Command(BaseCommand):
    help = "Run a provider simulator speaking the webhook protocol, calling back with signed webhooks."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8700)
        parser.add_argument("--secret", default="", help="whsec_... signing secret (default: PROVIDER_WEBHOOK_SECRET)")
        parser.add_argument("--api-key", default=None, help="required bearer key (default: PROVIDER_API_KEY)")
        parser.add_argument("--delay-ms", type=int, default=50, help="delay before each callback")
        parser.add_argument("--timeout-rate", type=float, default=0.0, help="share of answers held for --hold-s")
        parser.add_argument("--hold-s", type=float, default=None, help="how long a held answer waits (default: PROVIDER_TIMEOUT_S + 2)")
        parser.add_argument("--error-rate", type=float, default=0.0, help="share of requests answered 503")
        parser.add_argument("--duplicate-rate", type=float, default=0.0, help="share of callbacks sent twice")
        parser.add_argument("--late-rate", type=float, default=0.0, help="share of callbacks delivered --late-ms later")
        parser.add_argument("--late-ms", type=int, default=5000)
        parser.add_argument("--reorder", action="store_true", help="let callbacks overtake each other")
        parser.add_argument("--sync-rate", type=float, default=0.0, help="share answered 200 with the result")
        parser.add_argument("--redeliveries", type=int, default=3, help="re-deliveries of a callback not answered 2xx")
        parser.add_argument("--image-score", type=float, default=None,
                            help="the score of every image (default: drawn from its bytes' sha256)")
        parser.add_argument("--seed", type=int, default=None)
        parser.add_argument("--no-status-endpoint", action="store_true",
                            help="answer GET /v1/moderations/{id} with 404, as a provider without it")

    def handle(self, *args, **o):
        secret = o["secret"] or (settings.CALLBACK_SECRETS.get("webhook") or [""])[0]
        if not secret.startswith("whsec_"):
            raise CommandError("a whsec_... secret is required: --secret or PROVIDER_WEBHOOK_SECRET")
        faults = Faults(
            delay_ms=o["delay_ms"], timeout_rate=o["timeout_rate"],
            hold_s=o["hold_s"] if o["hold_s"] is not None else settings.PROVIDER_TIMEOUT_S + 2,
            error_rate=o["error_rate"], duplicate_rate=o["duplicate_rate"], late_rate=o["late_rate"],
            late_ms=o["late_ms"], reorder=o["reorder"], sync_rate=o["sync_rate"], redeliveries=o["redeliveries"],
            seed=o["seed"], status_endpoint=not o["no_status_endpoint"], image_score=o["image_score"],
        )
        api_key = o["api_key"] if o["api_key"] is not None else settings.PROVIDER_API_KEY
        try:
            simulator = ProviderSimulator(secret=secret, faults=faults, api_key=api_key, host=o["host"], port=o["port"])
        except (ValueError, OSError) as exc:
            raise CommandError(str(exc)) from exc
        stop = threading.Event()
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        simulator.start()
        self.stdout.write(f"Provider simulator on {simulator.url}/v1/moderations (stats: {simulator.url}/stats)")
        self.stdout.flush()
        stop.wait()
        simulator.stop()
        self.stdout.write("stopped; " + json.dumps(dict(simulator.stats)))
