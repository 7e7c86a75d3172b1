"""Erase contents, keeping their audit chain (moderation/privacy/erasure.py). Dry run unless --for-real."""

from __future__ import annotations

import getpass
import signal
import uuid

from django.core.management.base import BaseCommand, CommandError

from audit.models import Actor
from moderation.privacy.erasure import REASON_MAX_CHARS, NotFound, author_content_erase, content_erase, review_for
from moderation.models import ApiClient, Author


class Command(BaseCommand):
    help = (
        "Erase the content of reviews, given review or content ids, or every content of an author (--author "
        "with --client): text, media URL, metadata and every copy or quote of them, and every reason, note and "
        "explanation written about them, keeping the review, its transitions, decisions and ids with a tombstone "
        "(who, when, why); an author's strikes and actions stay, their reasons and appeals' words go. "
        "Content a legal hold keeps is not erased: the erasure is deferred until the hold ends. "
        "A review still being moderated is stopped. Dry run unless --for-real."
    )

    def add_arguments(self, parser):
        parser.add_argument("ids", nargs="*", help="review ids or content ids")
        parser.add_argument("--author", help="an author's id, as the client sent it: erase every content of it")
        parser.add_argument("--client", help="the API client (its name) whose author --author names")
        parser.add_argument("--reason", required=True, help="why (e.g. the erasure request's reference); kept on the tombstone")
        parser.add_argument("--by", default="", help="who asks (default: the operating system user)")
        parser.add_argument("--for-real", action="store_true")

    def handle(self, *args, ids, author, client, reason, by, for_real, **options):
        if not reason.strip() or len(reason) > REASON_MAX_CHARS:
            raise CommandError(f"--reason must say why, in at most {REASON_MAX_CHARS} characters")
        if bool(ids) == (author is not None) or (author is None) != (client is None):
            raise CommandError("give review or content ids, or --author with --client")
        stop = []
        signal.signal(signal.SIGTERM, lambda *_: stop.append(True))  # finish the current one, then stop
        actor_id = by or getpass.getuser()
        if author is not None:
            self._erase_author(self._author(client, author), actor_id, reason, for_real, stop)
        else:
            self._erase_reviews(ids, actor_id, reason, for_real, stop)
        if not for_real:
            self.stdout.write("dry run: nothing was erased; add --for-real to erase")

    def _erase_reviews(self, ids, actor_id, reason, for_real, stop):
        # Every id is resolved before anything is erased: a typo stops the run with nothing done.
        try:
            reviews = [review_for(uuid.UUID(i)) for i in ids]
        except ValueError:
            raise CommandError("ids are UUIDs (a review's or a content's)") from None
        except NotFound as exc:
            raise CommandError(str(exc)) from None
        for review in dict.fromkeys(reviews):
            if stop:
                self.stdout.write("stopped by SIGTERM")
                break
            report = content_erase(
                review_id=review.pk, actor=Actor.COMMAND, actor_id=actor_id, reason=reason, for_real=for_real
            )
            self.stdout.write(self._line(report))

    def _author(self, client_name, author_id) -> Author:
        found = Author.objects.select_related("client").filter(client__name=client_name, author_id=author_id).first()
        if found is None:
            known = ApiClient.objects.filter(name=client_name).exists()
            raise CommandError(f"client {client_name!r} sent no author {author_id!r}" if known
                               else f"no API client named {client_name!r}")
        return found

    def _erase_author(self, author, actor_id, reason, for_real, stop):
        """Every content of the author, one review at a time (moderation.privacy.erasure.author_content_erase):
        stopped by SIGTERM or a crash, running the same command again erases the rest."""
        report = author_content_erase(
            author_pk=author.pk, actor=Actor.COMMAND, actor_id=actor_id, reason=reason, for_real=for_real,
            stop=lambda: bool(stop), each=lambda erased: self.stdout.write(self._line(erased)),
        )
        verb = "erased" if for_real else "would erase"
        record = ", ".join(f"{name} x{n}" for name, n in report.redacted.items()) or "nothing left to erase"
        self.stdout.write(
            f"author {author.author_id!r} of {author.client.name}: {verb} {report.erased} contents "
            f"({report.stopped_moderation} stopped), {report.already_erased} erased before, {report.held} held by a "
            f"legal hold (deferred), {report.remaining} left; the words of its record: "
            + ("kept, a legal hold names the author" if report.record_held else record)
        )
        if stop:
            self.stdout.write("stopped by SIGTERM: run the same command again to erase the rest")

    def _line(self, report) -> str:
        if report.deferred:
            holds = ", ".join(str(pk) for pk in report.held_by)
            then = "erasure deferred until the hold ends" if report.for_real else "its erasure would be deferred"
            return f"review {report.review_id}: held by legal hold {holds}: {then}"
        if report.already_erased:
            closed = ("" if not report.appeal_closed else
                      "; its open appeal " + ("closed" if report.for_real else "would be closed") + ", the rejection stands")
            return (f"review {report.review_id}: already erased at {report.erased_at:%Y-%m-%d %H:%M:%S} "
                    f"({report.reason}){closed}")
        verb = "erased" if report.for_real else "would erase"
        columns = ", ".join(f"{name} x{n}" for name, n in report.redacted.items()) or "nothing stored"
        stopped = "; moderation stopped (-> manual_review)" if report.stopped_moderation else ""
        return f"review {report.review_id} (content {report.content_id}): {verb} {columns}{stopped}"
