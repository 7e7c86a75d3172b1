"""The platform in the foreground (`make run`): the web server, the moderation cluster and the
notification cluster.

The web server (granian, moderation/management/web.py) serves the API, the callbacks and the
admin, its static files through WhiteNoise, so no DEBUG and no other server is needed; a slow
client holds a socket, never a worker (docs/operations.md, "Slow clients"). The command
collects the static files and builds the three command lines, then replaces itself with the
supervisor (moderation/management/supervise.py: the standard library alone, so the process
that waits on the others does not hold Django's memory for the whole run). Each child runs in
a process group of its own and is stopped as a group. Ctrl-C (or SIGTERM) stops everything; if
any child exits on its own (a cluster master killed), the others are stopped too.
"""

import json
import os
import sys

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from moderation.management.processes import manage, notification_cluster_env
from moderation.management.web import web_command


class Command(BaseCommand):
    help = "Run the web server, the moderation cluster and the notification cluster until interrupted."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=settings.PORT)
        parser.add_argument("--web-workers", type=int, default=settings.WEB_CONCURRENCY)

    def handle(self, *args, host, port, web_workers, **options):
        call_command("collectstatic", interactive=False, verbosity=0)  # the admin's CSS for WhiteNoise
        env = {**os.environ, "PORT": str(port)}
        # Callbacks must reach the address actually served, unless told otherwise.
        env.setdefault("PUBLIC_BASE_URL", f"http://{host}:{port}")
        env.pop("Q_CLUSTER_NAME", None)
        spec = {
            "banner": (
                f"Web server on http://{host}:{port}/ (admin: /admin/, API: /api/v1/), callbacks expected at "
                f"{env['PUBLIC_BASE_URL']}/api/v1/callbacks/, the moderation and notification clusters "
                f"running ({web_workers} web, {settings.Q_WORKERS} moderation and {settings.NOTIFY_WORKERS} "
                "notification workers); Ctrl-C stops them all."
            ),
            "children": [
                {"name": "web", "argv": web_command(host, port, workers=web_workers), "env": {}},
                {"name": "moderation cluster", "argv": manage("qcluster"), "env": {}},
                {"name": "notification cluster", "argv": manage("qcluster"),
                 "env": {"Q_CLUSTER_NAME": notification_cluster_env(env)["Q_CLUSTER_NAME"]}},
            ],
        }
        sys.stdout.flush()
        sys.stderr.flush()
        argv = [sys.executable, "-m", "moderation.management.supervise", json.dumps(spec)]
        os.execve(argv[0], argv, env)
