"""Measure a policy version on labelled texts: precision, recall, F1 and the share sent to humans
(moderation/observability/evaluation.py; docs/operations.md, "Measuring a policy")."""

from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from moderation.models import ModerationPolicy
from moderation.text.visible import visible_text
from moderation.observability.evaluation import (
    ALL,
    EvaluationError,
    evaluation_figures,
    examples_judge,
    examples_read,
    figures_json,
    report_lines,
    summary_line,
)


class Command(BaseCommand):
    help = ("Run a policy version (the active one unless --policy) over labelled texts (a .csv or .jsonl file with "
            "text and label, optionally language and category) and print how well it judges them. Writes nothing "
            "but the --json file.")

    def add_arguments(self, parser):
        parser.add_argument("--data", required=True, help="a .csv (with a header) or .jsonl file of labelled texts")
        parser.add_argument("--policy", type=int, metavar="VERSION", help="the policy version (default: the active one)")
        parser.add_argument("--json", metavar="OUT", help="also write the figures to this file as JSON")
        parser.add_argument("--provider", metavar="NAME",
                            help="the provider that scores the texts (default: MODERATION_PROVIDER; "
                                 "one that answers by callback, webhook, cannot: give local)")

    def handle(self, *args, data: str, policy: int | None, provider: str | None, **options):
        provider, out = provider or settings.MODERATION_PROVIDER, options["json"]
        try:
            examples = examples_read(Path(data))
            chosen = _policy(policy)
            judged = examples_judge(examples, policy=chosen, provider_name=provider)
        except EvaluationError as exc:
            raise CommandError(str(exc)) from None
        figures = evaluation_figures(judged)
        self.stdout.write(f"policy v{chosen.version}, provider {provider}: {len(examples)} texts from {visible_text(data)}")
        for slice_ in figures:
            self.stdout.write("\n".join(report_lines(slice_)))
        if out:
            document = figures_json(figures, policy=chosen, provider_name=provider, data=data)
            Path(out).write_text(json.dumps(document, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
            self.stdout.write(f"figures written to {out}")
        self.stdout.write(summary_line(next(f for f in figures if f.by == ALL)))


def _policy(version: int | None) -> ModerationPolicy:
    """The version asked for (a draft too), or the active one (read only: never the default
    published here)."""
    policies = ModerationPolicy.objects.order_by("-version")
    chosen = policies.filter(is_draft=False).first() if version is None else policies.filter(version=version).first()
    if chosen is None:
        newest = policies.values_list("version", flat=True).first()
        raise CommandError(f"no policy version {version} (the newest is {newest})" if newest
                           else "no policy published: run migrate")
    return chosen
