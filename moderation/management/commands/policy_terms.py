"""Watched-term lists of the moderation policy, for operators' scripts.

    manage.py policy_terms import FILE --category CATEGORY --action reject|manual_review|allow
                                       [--language CODE] [--publish]
    manage.py policy_terms list
    manage.py policy_terms defaults [--remove] [--publish]

FILE has one term or phrase per line; `#` starts a comment. Without --publish, import prints
what the next version would contain and changes nothing. `defaults` adds the shipped default
term lists of the configured languages (moderation/data/terms; a fresh installation starts with
them) to the active version's rules, the same way; with --remove, takes them out of it (terms
an operator added stay).
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from moderation import services
from moderation.errors import PolicyChanged
from moderation.models import RuleAction
from moderation.validation import validate_policy
from moderation.text.default_terms import default_term_lists
from moderation.text.language import configured_languages
from moderation.text.rules import parse_terms, rule_name, term_lists_diff, term_lists_with


class Command(BaseCommand):
    help = "Import a watched-term list into the moderation policy (a new version with --publish), or list the rules."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="subcommand", required=True)
        imp = sub.add_parser("import", help="Add the terms of FILE to one rule of the policy.")
        imp.add_argument("file", metavar="FILE", help="One term or phrase per line; # starts a comment.")
        imp.add_argument("--category", required=True, help="A policy category; a new name creates it.")
        imp.add_argument("--action", required=True, choices=[a.value for a in RuleAction])
        imp.add_argument("--language", default="", help="ISO 639-1 code; the rule applies to that language only.")
        imp.add_argument("--publish", action="store_true", help="Publish the next policy version.")
        sub.add_parser("list", help="Show the active version's rules.")
        defaults = sub.add_parser("defaults", help="Add the shipped default term lists to the policy's rules.")
        defaults.add_argument("--remove", action="store_true", help="Take the default lists' terms out instead.")
        defaults.add_argument("--publish", action="store_true", help="Publish the next policy version.")

    def handle(self, *args, **options):
        if options["subcommand"] == "list":
            self._list(services.policy_active())
        elif options["subcommand"] == "defaults":
            self._change(default_term_lists(configured_languages()), options["publish"], remove=options["remove"],
                         notes=f"policy_terms defaults{' --remove' if options['remove'] else ''} (moderation/data/terms)")
        else:
            self._import(options)

    def _list(self, policy) -> None:
        self.stdout.write(f"{policy} (model judges: {', '.join(policy.model_languages) or 'every language'}; "
                          f"unjudged languages: {policy.unjudged_label})")
        self._list_rules(policy.term_lists)

    def _import(self, options) -> None:
        try:
            with open(options["file"], encoding="utf-8") as handle:
                terms = parse_terms(handle.read())
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read {options['file']}: {exc}") from exc
        if not terms:
            raise CommandError(f"{options['file']} has no terms")
        rule = {"category": options["category"].strip(), "action": options["action"],
                "language": options["language"].strip().lower(), "terms": terms}
        self._change([rule], options["publish"], notes=f"policy_terms import {options['file']}")

    def _change(self, rules: list[dict], publish: bool, *, notes: str, remove: bool = False) -> None:
        """Add each of `rules`' terms to (or, with `remove`, take them out of) the rule of its
        (category, action, language) in the active version: print the diff, and publish it as the
        next version with `publish`."""
        active = services.policy_active()
        draft = self._draft(active, rules, remove=remove)
        diff = term_lists_diff(active.term_lists, draft.term_lists)
        for change in diff:
            if change.added:
                self.stdout.write(f"{change.rule}: +{len(change.added)} ({_preview(change.added)})")
            if change.removed:
                self.stdout.write(f"{change.rule}: -{len(change.removed)} ({_preview(change.removed)})")
        if not diff:
            self.stdout.write(f"{'no term is' if remove else 'every term is already'} in the rule; {active} stays as it is")
            return
        if not publish:
            self.stdout.write(f"\nDry run: {active} is active; the next version would contain:")
            self._list_rules(draft.term_lists)
            self.stdout.write("Nothing changed (add --publish to publish it).")
            return
        try:
            # Based on the version read: a version published meanwhile gets the terms added
            # again rather than losing its own changes.
            published = services.policy_publish_change(
                lambda latest: {"term_lists": self._draft(latest, rules, remove=remove).term_lists}, notes=notes,
            )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        except PolicyChanged as exc:
            raise CommandError(f"{exc.reason}; run the import again") from exc
        self.stdout.write(self.style.SUCCESS(f"published policy version {published.version}"))

    def _draft(self, active, rules: list[dict], *, remove: bool = False):
        term_lists = active.term_lists
        for rule in rules:
            terms = {"remove": rule["terms"]} if remove else {"add": rule["terms"]}
            term_lists = term_lists_with(term_lists, category=rule["category"], action=rule["action"],
                                         language=rule["language"], **terms)
        draft = services.policy_draft(active, term_lists=term_lists)
        errors = validate_policy(services.policy_fields(draft))
        if errors:
            raise CommandError("the new version would be invalid:\n  " + "\n  ".join(errors))
        return draft

    def _list_rules(self, term_lists) -> None:
        if not term_lists:
            self.stdout.write("  no rules")
        for rule in term_lists:
            self.stdout.write(f"  {rule_name(rule)}  {len(rule['terms'])} terms: {_preview(rule['terms'])}")


def _preview(terms, limit: int = 8) -> str:
    shown = ", ".join(terms[:limit])
    return shown + (f", … ({len(terms) - limit} more)" if len(terms) > limit else "")
