"""PDQ hash banks of the moderation policy, for operators' scripts (docs/images.md, "Hash banks").

    manage.py hash_banks import FILE --bank NAME --category C --action reject|manual_review
                                     [--never-display] [--publish]
    manage.py hash_banks list
    manage.py hash_banks dry-run NAME [--all]
    manage.py hash_banks disable NAME --reason TEXT
    manage.py hash_banks enable NAME --reason TEXT
    manage.py hash_banks remove NAME HASH --reason TEXT

FILE has one 64-hex-digit PDQ hash a line, optionally `,label`, or is a ThreatExchange CSV/TSV
export (told by its header). Import writes the entries (a draft: no version takes them) and,
without --publish, says what the next version would take and which recent images they match;
with --publish it publishes that version. disable, enable and remove act at once. Nothing here
prints an image, only review ids and distances.
"""

from __future__ import annotations

import getpass

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from moderation import services
from moderation.errors import ModerationError
from moderation.media.images import BankFileInvalid, bank_file_parse, hash_normalize
from moderation.models import HashBank, HashBankEntry
from moderation.services.hash_banks import (
    DryRunScope,
    bank_dry_run,
    bank_entry_find,
    bank_entry_remove,
    bank_import,
    bank_publish,
    bank_set_enabled,
    banks_overview,
    banks_with,
)
from moderation.validation import validate_policy

ACTIONS = ("reject", "manual_review")
DRY_RUN_SHOWN = 50


def _operator() -> str:
    try:
        return f"manage.py hash_banks ({getpass.getuser()})"
    except (KeyError, OSError):  # no user name in a bare container
        return "manage.py hash_banks"


class Command(BaseCommand):
    help = "Import, list, dry-run, disable, enable and remove entries of PDQ hash banks."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="subcommand", required=True)
        imp = sub.add_parser("import", help="Add the hashes of FILE to a bank (created if new).")
        imp.add_argument("file", metavar="FILE", help="One PDQ hash a line (,label optional), or a ThreatExchange CSV.")
        imp.add_argument("--bank", required=True, help="The bank's name: lower-case letters, digits, '_', '.', '-'.")
        imp.add_argument("--category", required=True, help="A policy category; a new name creates it.")
        imp.add_argument("--action", required=True, choices=ACTIONS)
        imp.add_argument("--never-display", action="store_true", help="Images it matches are never shown.")
        imp.add_argument("--publish", action="store_true", help="Publish the next policy version.")
        sub.add_parser("list", help="Show the banks of the active version, and the others.")
        dry = sub.add_parser("dry-run", help="Which recent images a bank's draft entries would match.")
        dry.add_argument("bank", metavar="NAME")
        dry.add_argument("--all", action="store_true", help="Match every entry of the bank, not only its draft.")
        for name, what in (("disable", "Stop a bank matching, at once."), ("enable", "Let a bank match again.")):
            control = sub.add_parser(name, help=what)
            control.add_argument("bank", metavar="NAME")
            control.add_argument("--reason", required=True)
        remove = sub.add_parser("remove", help="Take a false positive out of a bank, at once.")
        remove.add_argument("bank", metavar="NAME")
        remove.add_argument("hash", metavar="HASH")
        remove.add_argument("--reason", required=True)

    def handle(self, *args, **options):
        command = options["subcommand"]
        try:
            if command == "import":
                self._import(options)
            elif command == "list":
                self._list()
            elif command == "dry-run":
                self._dry_run(options["bank"], DryRunScope.BANK if options["all"] else DryRunScope.DRAFT)
            elif command in ("disable", "enable"):
                self._set_enabled(options["bank"], command == "enable", options["reason"])
            else:
                self._remove(options["bank"], options["hash"], options["reason"])
        except HashBank.DoesNotExist as exc:
            raise CommandError(f"no bank {options.get('bank')!r}") from exc
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        except ModerationError as exc:
            raise CommandError(getattr(exc, "reason", None) or str(exc)) from exc

    # --- import -----------------------------------------------------------------------------------

    def _import(self, options) -> None:
        try:
            with open(options["file"], encoding="utf-8-sig") as handle:
                parsed = bank_file_parse(handle.read())
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read {options['file']}: {exc}") from exc
        except BankFileInvalid as exc:
            raise CommandError(f"{options['file']}: {exc}\nNothing was imported.") from exc
        if not parsed.entries:
            raise CommandError(f"{options['file']} has no PDQ hashes")
        name = options["bank"]
        settings = {"category": options["category"].strip(), "action": options["action"],
                    "never_display": options["never_display"]}
        self._refuse_invalid_version(name, settings)
        done = bank_import(name=name, entries=parsed.entries, source=options["file"], actor_name=_operator())
        self.stdout.write(f"bank {name}{' (new)' if done.created else ''}: {done.added} entries added, "
                          f"{done.already} already in the bank ({parsed.format} file)")
        if parsed.repeated:
            self.stdout.write(f"  {parsed.repeated} hashes were written more than once in the file (taken once)")
        if parsed.skipped:
            kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(parsed.skipped.items()))
            self.stdout.write(f"  {sum(parsed.skipped.values())} rows of other signal types skipped ({kinds})")
        if options["publish"]:
            self._publish(name, settings)
        else:
            self._next_version(name, settings)

    def _refuse_invalid_version(self, name: str, settings: dict) -> None:
        """Check the version this import leads to before writing anything (a bad category)."""
        active = services.policy_active()
        draft = services.policy_draft(active, hash_banks=banks_with(active.hash_banks,
                                                                   {"name": name, **settings, "through": 0}))
        errors = validate_policy(services.policy_fields(draft))
        if errors:
            raise CommandError("the new version would be invalid:\n  " + "\n  ".join(errors))

    def _next_version(self, name: str, settings: dict) -> None:
        active = services.policy_active()
        listed = next((b for b in active.hash_banks if b["name"] == name), None)
        row = next(r for r in banks_overview(active) if r.bank.name == name)
        taken = f"{active} takes {row.taken} of them" if listed else f"{active} does not list it"
        self.stdout.write(f"\nDry run: {taken}; the next version would take bank {name} ({settings['category']}, "
                          f"{settings['action']}{', never_display' if settings['never_display'] else ''}) "
                          f"with all {row.entries} entries ({row.draft} new).")
        self._dry_run(name, DryRunScope.DRAFT)
        self.stdout.write("Nothing published (add --publish to publish it).")

    def _publish(self, name: str, settings: dict) -> None:
        active = services.policy_active()
        listed = next((b for b in active.hash_banks if b["name"] == name), None)
        last = HashBankEntry.objects.filter(bank__name=name).order_by("-id").values_list("id", flat=True).first()
        if listed == {"name": name, **settings, "through": last}:
            self.stdout.write(f"{active} already takes bank {name} as it is; nothing to publish")
            return
        policy = bank_publish(name=name, **settings, actor_name=_operator())
        through = next(b["through"] for b in policy.hash_banks if b["name"] == name)
        self.stdout.write(self.style.SUCCESS(f"published policy version {policy.version}: bank {name} "
                                             f"through entry {through}"))

    # --- the others -------------------------------------------------------------------------------

    def _list(self) -> None:
        policy = services.policy_active()
        self.stdout.write(f"{policy}: pdq_distance {policy.pdq_distance}, image_fallback {policy.image_fallback}")
        rows = banks_overview(policy)
        if not rows:
            self.stdout.write("  no banks")
        for row in rows:
            state = "enabled" if row.bank.enabled else "DISABLED"
            if row.listed is None:
                self.stdout.write(f"  {row.bank.name}  draft (in no version): {row.entries} entries  {state}")
                continue
            listed = row.listed
            pending = f"  (+{row.draft} draft entries)" if row.draft else ""
            self.stdout.write(f"  {row.bank.name}  {listed['category']}  {listed['action']}  "
                              f"never_display={'yes' if listed['never_display'] else 'no'}  "
                              f"entries {row.taken} taken / {row.live} live  {state}{pending}")

    def _dry_run(self, name: str, scope: DryRunScope) -> None:
        run = bank_dry_run(name=name, scope=scope)
        what = "its draft entries" if scope == DryRunScope.DRAFT else "the whole bank"
        self.stdout.write(f"Dry run of bank {name} ({what}: {run.entries} entries) against the {run.images} most "
                          f"recent hashed images, within {run.max_distance} bits: {len(run.matches)} would match")
        # Ids, distances and statuses only: never the image, whatever the bank (never_display).
        for match in run.matches[:DRY_RUN_SHOWN]:
            self.stdout.write(f"  review {match.review_id}  distance {match.distance}  entry {match.entry_id}  "
                              f"now {match.status}")
        if len(run.matches) > DRY_RUN_SHOWN:
            self.stdout.write(f"  … {len(run.matches) - DRY_RUN_SHOWN} more")

    def _set_enabled(self, name: str, enabled: bool, reason: str) -> None:
        changed = bank_set_enabled(name=name, enabled=enabled, reason=reason, actor_name=_operator())
        done = "enabled" if enabled else "disabled"
        self.stdout.write(f"bank {name} {done}" if changed else f"bank {name} was already {done}; nothing changed")

    def _remove(self, name: str, value: str, reason: str) -> None:
        try:
            entry = bank_entry_find(name=name, pdq=hash_normalize(value))
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        except HashBankEntry.DoesNotExist as exc:
            raise CommandError(f"bank {name!r} has no entry {value.strip().lower()}") from exc
        if bank_entry_remove(entry_id=entry.pk, reason=reason, actor_name=_operator()):
            self.stdout.write(f"entry {entry.pk} removed from bank {name}: it matches nothing from now on")
        else:
            self.stdout.write(f"entry {entry.pk} of bank {name} was already removed; nothing changed")
