"""Run the real system under faults and kills, then check every invariant (lab/race_lab.py)."""

from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from lab.race_lab import LabConfig, RaceLab


class Command(BaseCommand):
    help = "Start web, K clusters and the provider simulator on the configured database; submit, kill, check."

    def add_arguments(self, parser):
        parser.add_argument("--reviews", type=int, default=200)
        parser.add_argument("--clusters", type=int, default=2)
        parser.add_argument("--duplicate-rate", type=float, default=0.1)
        parser.add_argument("--timeout-rate", type=float, default=0.05)
        parser.add_argument("--late-rate", type=float, default=0.05)
        parser.add_argument("--error-rate", type=float, default=0.05)
        parser.add_argument("--kill-workers", type=int, default=1, help="how many cluster processes to SIGKILL")
        parser.add_argument("--kill-any", action="store_true",
                            help="kill any process of any cluster (master, sentinel, pusher, monitor, workers; the "
                                 "notification cluster's too), not only the moderation clusters' workers; a cluster "
                                 "whose master died is started again")
        parser.add_argument("--report-rate", type=float, default=0.1,
                            help="share of decided reviews that more users than the threshold report, all at once")
        parser.add_argument("--appeal-rate", type=float, default=0.2,
                            help="share of rejected reviews appealed, by several concurrent requests")
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument("--quiesce-timeout", type=float, default=600.0, help="seconds to wait for every review to finish")
        parser.add_argument("--web-workers", type=int, default=2)
        parser.add_argument("--pgbouncer", action="store_true",
                            help="run every process through a real PgBouncer in transaction pooling (lab/pgbouncer.py)")
        parser.add_argument("--erase", type=int, default=0, help="reviews whose content the client erases mid-run")
        parser.add_argument("--prune", action="store_true", help="at the end, prune as if a year had passed")
        parser.add_argument("--web-outage-s", type=float, default=0.0,
                            help="stop the web tier this many seconds once the reviews are in; reports the recovery")
        parser.add_argument("--batch-size", type=int, default=None,
                            help="MODERATION_BATCH_SIZE of the platform's processes (default: the setting's; 1: no batches)")
        parser.add_argument("--hostile-rate", type=float, default=0.2,
                            help="share of reviews with hostile texts (no words, emoji, bidi and zero-width controls, "
                                 "long allow-dense texts), under the lab's term, pattern and allow rules (0: neither)")
        parser.add_argument("--decision-bound-s", type=float, default=240.0,
                            help="every review must be first decided within this many seconds of its submission")
        authors = parser.add_argument_group("authors (lab/author_traffic.py)")
        authors.add_argument("--authors", type=int, default=None,
                             help="authors the reviews are spread over (default: one per 20 reviews; 0: no author traffic)")
        authors.add_argument("--author-reject-rate", type=float, default=0.3,
                             help="share of the authors' texts that are insults (rejected: strikes, the ladder)")
        authors.add_argument("--moderator-rate", type=float, default=0.3,
                             help="steps per second of each of the two moderators acting on authors")
        authors.add_argument("--stale-rate", type=float, default=0.2,
                             help="share of account actions sent from an older page of the author")
        authors.add_argument("--override-rate", type=float, default=0.2,
                             help="share of the moderators' steps that decide one of the author's reviews again")
        authors.add_argument("--account-appeal-rate", type=float, default=0.5,
                             help="share of suspensions and bans appealed (twice at once)")
        authors.add_argument("--sweep-ahead-days", type=float, default=10.0,
                             help="each of the two concurrent expiry runs acts as if up to this many days had passed")
        authors.add_argument("--lapse-rate", type=float, default=0.005,
                             help="share of expiry runs past the strike window (every strike lapses)")
        notices = parser.add_argument_group("notices (lab/notice_traffic.py)")
        notices.add_argument("--notice-rate", type=float, default=0.1,
                             help="share of reviews given DSA notices and trusted flaggers' reports (with a user's "
                                  "report), each reporter twice at once, a few seconds after submission (0: none)")
        notices.add_argument("--notice-decide-rate", type=float, default=0.5,
                             help="share of the notice bursts on a review with a human that carry its decision")
        notices.add_argument("--notice-reprocess-rate", type=float, default=0.3,
                             help="share of the notice bursts on a decided review that carry a reprocess")
        tdb = parser.add_argument_group("statements of reasons (lab/transparency_traffic.py)")
        tdb.add_argument("--no-statements", action="store_true",
                         help="send no statements to the fake Transparency Database (nor check them)")
        tdb.add_argument("--no-tdb-faults", action="store_true",
                         help="the fake Transparency Database has no outages or 5xx answers")

    def handle(self, *args, **o):
        if (o["reviews"] < 1 or o["clusters"] < 1 or o["web_workers"] < 1 or o["kill_workers"] < 0 or o["erase"] < 0
                or o["web_outage_s"] < 0 or (o["batch_size"] is not None and not 1 <= o["batch_size"] <= 256)):
            raise CommandError("--reviews, --clusters and --web-workers must be at least 1; --kill-workers, --erase "
                               "and --web-outage-s not negative; --batch-size from 1 to 256")
        if not (0 <= o["report_rate"] <= 1 and 0 <= o["appeal_rate"] <= 1 and 0 <= o["hostile_rate"] <= 1):
            raise CommandError("--report-rate, --appeal-rate and --hostile-rate are shares from 0 to 1")
        if o["decision_bound_s"] <= 0:
            raise CommandError("--decision-bound-s must be positive")
        rates = ("author_reject_rate", "stale_rate", "override_rate", "account_appeal_rate", "lapse_rate",
                 "notice_rate", "notice_decide_rate", "notice_reprocess_rate")
        if not all(0 <= o[rate] <= 1 for rate in rates):
            raise CommandError("--author-reject-rate, --stale-rate, --override-rate, --account-appeal-rate, "
                               "--lapse-rate, --notice-rate, --notice-decide-rate and --notice-reprocess-rate are "
                               "shares from 0 to 1")
        if (o["authors"] is not None and o["authors"] < 0) or o["moderator_rate"] <= 0 or o["sweep_ahead_days"] < 0:
            raise CommandError("--authors and --sweep-ahead-days must not be negative, --moderator-rate positive")
        executor = MigrationExecutor(connection)
        if executor.migration_plan(executor.loader.graph.leaf_nodes()):
            raise CommandError(f"the database {connection.settings_dict['NAME']!r} is not migrated: "
                               "run `python manage.py migrate` on it first")
        config = LabConfig(
            reviews=o["reviews"], clusters=o["clusters"], duplicate_rate=o["duplicate_rate"],
            timeout_rate=o["timeout_rate"], late_rate=o["late_rate"], error_rate=o["error_rate"],
            kill_workers=o["kill_workers"], kill_any=o["kill_any"], seed=o["seed"], quiesce_timeout_s=o["quiesce_timeout"],
            web_workers=o["web_workers"], pgbouncer=o["pgbouncer"], erase=o["erase"], prune=o["prune"],
            report_rate=o["report_rate"], appeal_rate=o["appeal_rate"],
            web_outage_s=o["web_outage_s"], batch_size=o["batch_size"], hostile_rate=o["hostile_rate"],
            decision_bound_s=o["decision_bound_s"], authors=o["authors"], author_reject_rate=o["author_reject_rate"],
            moderator_rate=o["moderator_rate"], stale_rate=o["stale_rate"], override_rate=o["override_rate"],
            account_appeal_rate=o["account_appeal_rate"], sweep_ahead_days=o["sweep_ahead_days"],
            lapse_rate=o["lapse_rate"], notice_rate=o["notice_rate"], notice_decide_rate=o["notice_decide_rate"],
            notice_reprocess_rate=o["notice_reprocess_rate"], statements=not o["no_statements"],
            tdb_faults=not o["no_tdb_faults"],
        )
        try:
            report = RaceLab(config).run()
        except (ValueError, RuntimeError) as exc:
            raise CommandError(str(exc)) from exc
        width = max(len(k) for k in report.figures)
        for name, value in report.figures.items():
            self.stdout.write(f"{name:<{width}}  {value}")
        for problem in report.violations:
            self.stdout.write(self.style.ERROR(f"VIOLATION {problem}"))
        for column in sorted(report.erased_found):
            self.stdout.write(self.style.ERROR(f"ERASED CONTENT FOUND in {column}"))
        if report.late:
            self.stdout.write(self.style.ERROR(f"{len(report.late)} reviews first decided later than "
                                               f"{config.decision_bound_s:g} s after their submission"))
        if report.unfinished:
            self.stdout.write(self.style.ERROR(f"{len(report.unfinished)} reviews not final within the timeout"))
        if not report.ok:
            raise CommandError("the race lab found violations")
        self.stdout.write(self.style.SUCCESS("every invariant holds"))
