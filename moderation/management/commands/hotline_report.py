"""Write a hotline report package from a review's preservation snapshot (moderation/privacy/hotline.py)."""

from __future__ import annotations

import getpass
import json
import uuid

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from moderation.privacy.erasure import NotFound, review_for
from moderation.privacy.hotline import NoSnapshot, hotline_package


class Command(BaseCommand):
    help = (
        "Write a CyberTipline-style report package (JSON) from the review's preservation snapshot: incident "
        "time, the content's MD5, SHA-1, SHA-256 and PDQ hashes, the uploader's identifiers and the platform's "
        "notes. Places a one-year legal hold on the review. Sends nothing over the network: the operator hands "
        "the file to the hotline (docs/legal-holds.md)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--review", required=True, help="the review's id (or its content's)")
        parser.add_argument("--format", choices=["json"], default="json")
        parser.add_argument("--out", help="the file to write (it must not exist yet); default: standard output")
        parser.add_argument("--reference", default="", help="the hotline report's number (default: one made up)")
        parser.add_argument("--by", default="", help="who makes the report (default: the operating system user)")

    def handle(self, *args, review, format, out, reference, by, **options):
        try:
            found = review_for(uuid.UUID(review))
        except ValueError:
            raise CommandError("--review is a UUID (a review's or a content's)") from None
        except NotFound as exc:
            raise CommandError(str(exc)) from None
        reference = reference.strip() or f"hotline-{uuid.uuid4().hex[:12]}"
        try:
            package = hotline_package(review_id=found.pk, operator=by or getpass.getuser(), reference=reference,
                                      write=lambda body: self._write(body, out))
        except NoSnapshot as exc:
            raise CommandError(str(exc)) from None
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        except FileExistsError:
            raise CommandError(f"{out} exists already: choose a new file (nothing was written, no hold placed)") from None
        except OSError as exc:
            raise CommandError(f"cannot write {out}: {exc.strerror} (nothing was written, no hold placed)") from None
        where = out or "standard output"
        self.stderr.write(f"review {found.pk}: package {reference} written to {where}; legal hold {package.hold_id} "
                          f"until {package.body['legal_hold']['expires_at'][:10]}; nothing was sent")

    def _write(self, body: dict, out: str | None) -> None:
        text = json.dumps(body, indent=2, ensure_ascii=False, sort_keys=True) + "\n"
        if out is None:
            self.stdout.write(text, ending="")
            return
        with open(out, "x", encoding="utf-8") as file:  # never over another report
            file.write(text)
