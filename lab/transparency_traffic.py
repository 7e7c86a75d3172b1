"""The race lab's Transparency Database (docs/race-lab.md): the fake of lab/transparency_db.py on
loopback, which the platform's notification cluster sends statements of reasons to on its
schedule while reviews, strikes, notices and appeals race; outages and 5xx answers injected
meanwhile. At the end the lab sends what is left (`submit_statements`, beside the cluster's own
schedule: two senders at once) and checks that every statement of the run is in the database,
that none was refused, and that none was sent again once the database had it.

The faults are the unambiguous ones (503, refused connections, 500 before processing): a batch
the database stored is always answered 201, so a statement the database is told about twice
means a sender sent it twice, which is what the check counts.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

from lab.transparency_db import FakeTransparencyDatabase

TOKEN = "race-lab-tdb-token"


class TransparencyTraffic:
    def __init__(self, *, seed: int, faults: bool = True) -> None:
        self.rng = random.Random(seed)
        self.faults = faults
        self.database = FakeTransparencyDatabase(tokens={TOKEN: "Race lab"})
        self.done = threading.Event()
        self.injected: Counter[str] = Counter()
        self.unexpected: list[str] = []
        self._figures: dict = {}
        self.quiet_from = 0.0  # time.monotonic() when the last fault injected ends

    def env(self) -> dict[str, str]:
        """What the platform's processes need to send here, with short backoff. The timeout is long:
        on a loaded machine an answer that came after it would be a send the database stored
        and the sender did not hear of, which the lab would count as sent again."""
        return {"DSA_TDB_URL": self.database.url, "DSA_TDB_TOKEN": TOKEN, "DSA_TDB_TIMEOUT_S": "20",
                "DSA_TDB_BACKOFF_S": "1", "DSA_TDB_BACKOFF_MAX_S": "8"}

    def start(self) -> list[threading.Thread]:
        thread = threading.Thread(target=self._inject, daemon=True)
        thread.start()
        return [thread]

    def _inject(self) -> None:
        """Faults from the first minute on, until the run's reviews are decided."""
        if not self.faults:
            return
        self.done.wait(self.rng.uniform(20, 40))
        while not self.done.is_set():
            fault = self.rng.choice(["503", "refuse", "500"])
            if fault == "500":
                self.database.fail_next(self.rng.randint(1, 3), status=500)
            else:
                seconds = self.rng.uniform(5, 20)
                self.database.outage(seconds, mode=fault)
                self.quiet_from = time.monotonic() + seconds
            self.injected[fault] += 1
            self.done.wait(self.rng.uniform(30, 90))

    def finish(self, review_ids: list, *, timeout_s: float = 180) -> None:
        """Send what is still pending (the schedule may be sending too), then check and count."""
        from django.test.utils import override_settings

        from moderation.models import StatementStatus, TransparencyStatement
        from moderation.services import statements_submit

        self.done.set()
        time.sleep(max(0.0, self.quiet_from - time.monotonic()))  # the last outage ends
        deadline = time.monotonic() + timeout_s
        runs = sent_here = 0
        # This process sends as the platform's do (their settings: env()), beside their schedule.
        settings = {name: float(value) if name.endswith("_S") else value for name, value in self.env().items()}
        with override_settings(**settings, WEBHOOK_ALLOW_PRIVATE=True):
            while time.monotonic() < deadline:
                runs += 1
                sent = statements_submit(force=True)
                sent_here += sent.submitted
                if not sent.pending:
                    break
                time.sleep(2)
        ours = TransparencyStatement.objects.filter(review_id__in=review_ids) | TransparencyStatement.objects.filter(
            account_action__author__reviews__in=review_ids)
        rows = dict(ours.distinct().values_list("puid", "status"))
        stored = self.database.stored_puids()
        missing = sorted(puid for puid in rows if puid not in stored)
        refused = sorted(puid for puid, status in rows.items() if status == StatementStatus.REJECTED)
        pending = sorted(puid for puid, status in rows.items() if status == StatementStatus.PENDING)
        again = sorted(puid for puid, n in self.database.named_existing.items() if puid in rows and n)
        accepted = Counter(puid for request in self.database.requests if request.status == 201 for puid in request.puids)
        twice = sorted(puid for puid in rows if accepted[puid] > 1)
        for what, puids in (("missing from the Transparency Database", missing),
                            ("refused by the Transparency Database", refused), ("still pending", pending),
                            ("sent again after the database had it", again), ("stored twice", twice)):
            self.unexpected += [f"statement {puid}: {what}" for puid in puids[:20]]
        decisions = ours.filter(decision__isnull=False).distinct().count()
        self._figures = {
            "statements of reasons (decisions / account actions)": f"{decisions} / {len(rows) - decisions}",
            "statements missing / refused / sent again / stored twice":
                f"{len(missing)} / {len(refused)} / {len(again)} / {len(twice)}",
            "statement batches received (refused with the batch or by a fault)":
                f"{len(self.database.requests)} ({sum(1 for r in self.database.requests if r.status != 201)})",
            "Transparency Database faults (503 / refused / 500)":
                " / ".join(str(self.injected[f]) for f in ("503", "refuse", "500")),
            "submit_statements at the end: runs / statements it submitted": f"{runs} / {sent_here}",
        }

    def stop(self) -> None:
        self.done.set()
        self.database.stop()

    def figures(self) -> dict:
        return dict(self._figures)
