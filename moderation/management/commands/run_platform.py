"""The platform in the foreground (`make run`): the web server, the moderation cluster and the
notification cluster.

The web server (granian, moderation/management/web.py) serves the API, the callbacks and the
admin, its static files through WhiteNoise, so no DEBUG and no other server is needed; a slow
client holds a socket, never a worker (docs/operations.md, "Slow clients"). Each child runs in
a process group of its own and is stopped as a group (moderation/management/processes.py).
Ctrl-C (or SIGTERM) stops everything; if any child exits on its own (a cluster master killed),
the others are stopped too.
"""

import os
import signal
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from moderation.management.processes import manage, notification_cluster_env, start, stop_groups
from moderation.management.web import web_command


class Command(BaseCommand):
    help = "Run the web server, the moderation cluster and the notification cluster until interrupted."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=settings.PORT)
        parser.add_argument("--web-workers", type=int, default=int(os.environ.get("WEB_CONCURRENCY", 2)))

    def handle(self, *args, host, port, web_workers, **options):
        call_command("collectstatic", interactive=False, verbosity=0)  # the admin's CSS for WhiteNoise
        env = {**os.environ, "PORT": str(port)}
        # Callbacks must reach the address actually served, unless told otherwise.
        env.setdefault("PUBLIC_BASE_URL", f"http://{host}:{port}")
        env.pop("Q_CLUSTER_NAME", None)
        children = {
            "web": start(web_command(host, port, workers=web_workers), env),
            "moderation cluster": start(manage("qcluster"), env),
            "notification cluster": start(manage("qcluster"), notification_cluster_env(env)),
        }
        stopping = False

        def stop(signum, frame):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        self.stdout.write(
            f"Web server on http://{host}:{port}/ (admin: /admin/, API: /api/v1/), callbacks expected at "
            f"{env['PUBLIC_BASE_URL']}/api/v1/callbacks/, the moderation and notification clusters "
            "running; Ctrl-C stops them all."
        )
        while not stopping and all(p.poll() is None for p in children.values()):
            time.sleep(0.2)
        exited = [name for name, p in children.items() if p.poll() is not None]
        if exited and not stopping:
            self.stderr.write(f"{', '.join(exited)} exited; stopping the rest")
        stop_groups(children, log=self.stderr.write)
        self.stdout.write(f"Stopped ({', '.join(f'{n} exit {p.returncode}' for n, p in children.items())}).")
