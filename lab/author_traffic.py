"""What happens to the race lab's authors besides their reviews being decided, while the
pipeline runs (docs/design.md, "Authors, strikes and account actions").

Two lab moderators, each in a thread of its own, act on authors (warn, suspend for a few days,
ban, lift), some from a page older than the author (a stale version, refused with what changed),
and decide some of the authors' reviews again (a rejection overturned revokes its strike, a new
one writes one). Authors appeal the suspension or ban in force, twice at once; the appeals are
resolved by the moderator who did not impose the action (sometimes the one who did tries first,
and is refused). Two expiry jobs run `authors_sweep` concurrently, each as if some days had
passed (sometimes past the strike window, so strikes lapse and ladders are climbed again).
Every refusal must be one the services name; anything else is a violation.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Count
from django.utils import timezone

from audit.models import EventKind, PipelineEvent
from moderation import services
from moderation.errors import (
    AppealExists,
    FourEyesRequired,
    IllegalStandingChange,
    ModerationError,
    NotApplicable,
    NotAppealable,
    StaleAuthor,
)
from moderation.models import (
    FINAL_STATUSES,
    AccountAction,
    AccountAppeal,
    AccountAppealStatus,
    ApiClient,
    Author,
    ContentReview,
    DecisionNotification,
    NotificationKind,
    ReviewStatus,
    StandingCause,
    StandingTransition,
    Strike,
)

# A moderator's account actions, and how often each is tried.
ACCOUNT_ACTIONS = {"warn": 2, "suspend": 3, "ban": 1, "lift": 4}
REFUSALS = (StaleAuthor, IllegalStandingChange, NotApplicable)


@dataclass
class AuthorTraffic:
    client: ApiClient
    moderator_rate: float  # steps per second of each of the two moderators
    stale_rate: float  # share of account actions sent from an older page of the author
    override_rate: float  # share of a moderator's steps that decide one of the author's reviews again
    account_appeal_rate: float  # share of suspensions and bans appealed
    sweep_ahead_days: float  # each expiry run acts as if up to this many days had passed
    lapse_rate: float  # share of expiry runs past the strike window (every strike lapses)
    seed: int = 1
    counts: Counter = field(default_factory=Counter)
    unexpected: list = field(default_factory=list)

    def __post_init__(self):
        self.done = threading.Event()
        self.began = timezone.now()
        self.window_days = services.policy_active().strike_window_days
        users = get_user_model().objects
        self.moderators = [users.get_or_create(username=f"race-lab-author-moderator-{i}")[0] for i in (1, 2)]
        self._lock = threading.Lock()  # the counters, shared by the threads
        self._appealed: set = set()  # restrictions the appellants have considered (one thread)

    def start(self) -> list[threading.Thread]:
        """The two moderators, the appellants with their resolver, and the two expiry jobs."""
        jobs = [(self._moderate, 0), (self._moderate, 1), (self._appeals, 0), (self._sweep, 0), (self._sweep, 1)]
        threads = [threading.Thread(target=self._guarded, args=job, daemon=True) for job in jobs]
        for thread in threads:
            thread.start()
        return threads

    def _guarded(self, job, i: int) -> None:
        """Run one of the traffic's loops with its own random stream and connection, until `done`;
        an error the services do not name is a violation, and ends that loop."""
        rng = random.Random(f"{self.seed}-{job.__name__}-{i}")
        try:
            while not self.done.is_set():
                job(rng, i)
        except Exception as exc:  # noqa: BLE001 - reported as a violation of the lab, with its type
            self.unexpected.append(f"author traffic {job.__name__}: {type(exc).__name__}: {exc}")
        finally:
            connection.close()

    def _count(self, what: str) -> None:
        with self._lock:
            self.counts[what] += 1

    def _authors(self) -> list[int]:
        return list(Author.objects.filter(client=self.client).values_list("pk", flat=True))

    # --- the moderators -------------------------------------------------------------------------

    def _moderate(self, rng: random.Random, i: int) -> None:
        time.sleep(rng.expovariate(self.moderator_rate))
        authors = self._authors()
        if not authors:
            return
        author_pk = rng.choice(authors)
        if rng.random() < self.override_rate:
            self._decide_again(rng, self.moderators[i], author_pk)
            return
        what = rng.choices(list(ACCOUNT_ACTIONS), weights=list(ACCOUNT_ACTIONS.values()))[0]
        version = Author.objects.values_list("version", flat=True).get(pk=author_pk)
        stale = version > 1 and rng.random() < self.stale_rate
        kwargs = {"author_pk": author_pk, "moderator": self.moderators[i], "reason": f"race lab: {what}",
                  "expected_version": version - 1 if stale else version}
        try:
            if what == "lift":
                services.author_lift(**kwargs)
            else:
                services.author_act(action=what, days=rng.randint(1, 3) if what == "suspend" else None, **kwargs)
            self._count(f"{what} taken")
        except REFUSALS as exc:
            self._count(f"{what} refused: {type(exc).__name__}")
            if stale and not isinstance(exc, StaleAuthor):
                self.unexpected.append(f"{what} of author {author_pk} from a stale page: {type(exc).__name__}")

    def _decide_again(self, rng: random.Random, moderator, author_pk: int) -> None:
        """Decide one of the author's final reviews again: approved (its strike, if any, is
        revoked) or rejected (a strike, replacing any it had)."""
        review = (ContentReview.objects.filter(author_id=author_pk, status__in=FINAL_STATUSES)
                  .order_by("?").values_list("pk", "version").first())
        if review is None:
            return
        label = rng.choice([ReviewStatus.APPROVED, ReviewStatus.REJECTED])
        try:
            services.review_override(review_id=review[0], label=label, reason="race lab: the author's record",
                                     category="harassment" if label == ReviewStatus.REJECTED else "",
                                     moderator=moderator, expected_version=review[1])
            self._count(f"review decided again: {label}")
        except ModerationError as exc:  # moved meanwhile, leased, or the appealed decision's own moderator
            self._count(f"review decision refused: {type(exc).__name__}")

    # --- account appeals ------------------------------------------------------------------------

    def _appeals(self, rng: random.Random, i: int) -> None:
        time.sleep(0.3)
        restricted = (Author.objects.filter(client=self.client, restriction__isnull=False)
                      .exclude(restriction_id__in=self._appealed).values_list("author_id", "restriction_id"))
        with ThreadPoolExecutor(max_workers=2) as pool:
            for author_id, action_id in restricted:
                self._appealed.add(action_id)
                if rng.random() < self.account_appeal_rate:
                    for outcome in pool.map(lambda _: self._file(author_id), range(2)):
                        self._count(f"account appeal {outcome}")
        for appeal in AccountAppeal.objects.filter(author__client=self.client, status=AccountAppealStatus.OPEN) \
                .select_related("action"):
            self._resolve(rng, appeal)

    def _file(self, author_id: str) -> str:
        """One of two concurrent appeals of the author's restriction: at most one is filed."""
        try:
            services.account_appeal_file(client=self.client, author_id=author_id, statement="race lab: please")
            return "filed"
        except (AppealExists, NotAppealable) as exc:  # the other one won, or it ended meanwhile
            return type(exc).__name__
        finally:
            connection.close()  # a pool thread's own connection

    def _resolve(self, rng: random.Random, appeal: AccountAppeal) -> None:
        imposer = next((m for m in self.moderators if m.pk == appeal.action.moderator_id), None)
        other = rng.choice([m for m in self.moderators if m is not imposer])
        outcome = rng.choice([AccountAppealStatus.UPHELD, AccountAppealStatus.OVERTURNED])
        for moderator in ([imposer] if imposer is not None and rng.random() < 0.2 else []) + [other]:
            try:
                services.account_appeal_resolve(appeal_id=appeal.pk, moderator=moderator, outcome=outcome,
                                                reason="race lab: looked again")
                self._count(f"account appeal {outcome}")
                if moderator is imposer:
                    self.unexpected.append(f"account appeal {appeal.pk}: resolved by the moderator who imposed it")
                return
            except FourEyesRequired:
                self._count("account appeal refused: FourEyesRequired")

    # --- the expiry jobs ------------------------------------------------------------------------

    def _sweep(self, rng: random.Random, i: int) -> None:
        time.sleep(rng.uniform(0.5, 1.5))
        past_window = rng.random() < self.lapse_rate
        days = self.window_days + 1 if past_window else rng.uniform(0, self.sweep_ahead_days)
        done = services.authors_sweep(now=timezone.now() + timedelta(days=days))
        with self._lock:
            self.counts["expiry runs"] += 1
            self.counts["expiry runs past the strike window"] += past_window
            self.counts.update({f"swept: {k}": n for k, n in done.items()})

    # --- figures --------------------------------------------------------------------------------

    def figures(self) -> dict:
        authors = Author.objects.filter(client=self.client)
        strikes = Strike.objects.filter(author__client=self.client)
        ends = Counter(dict(strikes.values_list("end").annotate(n=Count("id")).order_by()))
        actions = Counter({f"{kind} by {cause}": n for kind, cause, n in AccountAction.objects.filter(
            author__client=self.client).values_list("action", "cause").annotate(n=Count("id")).order_by()})
        restored = Counter(dict(StandingTransition.objects.filter(
            author__client=self.client, cause__in=[StandingCause.EXPIRED, StandingCause.LIFTED, StandingCause.OVERTURNED])
            .values_list("cause").annotate(n=Count("id")).order_by()))
        appeals = Counter(dict(AccountAppeal.objects.filter(author__client=self.client).values_list("status")
                               .annotate(n=Count("id")).order_by()))
        notified = Counter(dict(DecisionNotification.objects.filter(client=self.client, review=None)
                                .values_list("kind").annotate(n=Count("id")).order_by()))
        events = PipelineEvent.objects.filter(created_at__gte=self.began)
        standings = Counter(dict(authors.values_list("standing").annotate(n=Count("id")).order_by()))
        c = self.counts
        return {
            "authors (reviews each: min / max)": f"{authors.count()} ({self._reviews_per_author()})",
            "authors good / warned / suspended / banned": " / ".join(
                str(standings[s]) for s in ("good", "warned", "suspended", "banned")),
            "strikes written (active / replaced / overturned / lapsed)": f"{strikes.count()} ("
            + " / ".join(str(ends[e]) for e in ("", "replaced", "overturned", "lapsed")) + ")",
            "account actions": ", ".join(f"{k} {n}" for k, n in sorted(actions.items())) or "0",
            "ladder rungs already taken (a rejection reached a rung at or below the standing)": events.filter(
                kind=EventKind.LADDER_RUNG_SKIPPED).count(),
            "manual actions taken (warn / suspend / ban / lift)": " / ".join(
                str(c[f"{a} taken"]) for a in ACCOUNT_ACTIONS),
            "manual actions refused (stale page / illegal change / not applicable)": " / ".join(
                str(sum(n for k, n in c.items() if k.endswith(f"refused: {e.__name__}"))) for e in REFUSALS),
            "reviews decided again (approved / rejected / refused)": " / ".join(
                [str(c["review decided again: approved"]), str(c["review decided again: rejected"]),
                 str(sum(n for k, n in c.items() if k.startswith("review decision refused")))]),
            "account appeals (filed / appeal_exists / not_appealable)": " / ".join(
                str(c[f"account appeal {k}"]) for k in ("filed", "AppealExists", "NotAppealable")),
            "account appeals upheld / overturned / open; four-eyes refusals": " / ".join(
                str(appeals[s]) for s in ("upheld", "overturned", "open")) + f"; {c['account appeal refused: FourEyesRequired']}",
            "restorations (expired / lifted / overturned)": " / ".join(
                str(restored[s]) for s in ("expired", "lifted", "overturned")),
            "expiry runs (past the strike window)": f"{c['expiry runs']} ({c['expiry runs past the strike window']})",
            "reviews submitted while their author was restricted": ContentReview.objects.filter(
                author__client=self.client, author_restricted=True).count(),
            "author notifications (actioned / restored / appeal resolved)": " / ".join(str(notified[k]) for k in (
                NotificationKind.AUTHOR_ACTIONED, NotificationKind.AUTHOR_RESTORED,
                NotificationKind.ACCOUNT_APPEAL_RESOLVED)),
            "author traffic errors": len(self.unexpected),
        }

    def _reviews_per_author(self) -> str:
        counts = list(ContentReview.objects.filter(author__client=self.client).values("author")
                      .annotate(n=Count("id")).values_list("n", flat=True))
        return f"{min(counts)} / {max(counts)}" if counts else "-"
