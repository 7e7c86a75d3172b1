"""Serve a fake DSA Transparency Database on loopback (lab/transparency_db.py, docs/transparency.md)."""

from __future__ import annotations

import json
import signal
import threading

from django.core.management.base import BaseCommand, CommandError

from lab.transparency_db import FakeTransparencyDatabase
from lab.transparency_rules import RULES_PATH, RulesError, load_rules


class Command(BaseCommand):
    help = "Run a fake DSA Transparency Database that validates statements of reasons like the real one."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1", help="a loopback address")
        parser.add_argument("--port", type=int, default=8710)
        parser.add_argument("--token", default="fake-tdb-token", help="the bearer token it accepts")
        parser.add_argument("--platform", default="Fake Platform", help="the platform name its answers carry")
        parser.add_argument("--rules", default=str(RULES_PATH), help="the rules fixture to validate from")
        parser.add_argument("--outage-s", type=float, default=0.0, help="answer 503 for this long after starting")
        parser.add_argument("--slow-s", type=float, default=0.0, help="hold answers --delay-s for this long after starting")
        parser.add_argument("--delay-s", type=float, default=0.0, help="how long a slow answer is held (stored first)")

    def handle(self, *args, **o):
        try:
            rules = load_rules(o["rules"])
            fake = FakeTransparencyDatabase(tokens={o["token"]: o["platform"]}, rules=rules, host=o["host"], port=o["port"])
        except (RulesError, ValueError, OSError) as exc:
            raise CommandError(str(exc)) from exc
        if o["outage_s"] > 0:
            fake.outage(o["outage_s"])
        if o["slow_s"] > 0:
            fake.slow(o["slow_s"], delay_s=o["delay_s"])
        stop = threading.Event()
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        self.stdout.write(f"Fake Transparency Database on {fake.url}/api/v1/statements "
                          f"(rules at commit {rules.source['commit'][:12]}; stats: {fake.url}/stats)")
        self.stdout.flush()
        stop.wait()
        fake.stop()
        self.stdout.write("stopped; " + json.dumps(dict(fake.stats)))
