"""`manage.py serve_web --bind HOST:PORT --workers N`: the web tier alone, as deploy/systemd's
moderation-web.service runs it. It becomes the web server (exec), so the supervisor signals the
server's master itself: SIGTERM stops it gracefully, SIGHUP starts workers on new code."""

import os

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from moderation.management.web import web_command


class Command(BaseCommand):
    help = "Replace this process with the web server (docs/operations.md, \"Slow clients\")."

    def add_arguments(self, parser):
        parser.add_argument("--bind", default="127.0.0.1:8000", help="HOST:PORT")
        parser.add_argument("--workers", type=int, default=settings.WEB_CONCURRENCY)

    def handle(self, *args, bind, workers, **options):
        host, _, port = bind.rpartition(":")
        if not host or not port.isdigit() or workers < 1:
            raise CommandError(f"--bind must be HOST:PORT and --workers at least 1, got {bind!r} and {workers}")
        argv = web_command(host.strip("[]"), port, workers=workers)
        os.execv(argv[0], argv)
