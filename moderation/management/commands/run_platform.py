"""The web server and the django-q2 cluster together in the foreground (`make run`).

Ctrl-C (or SIGTERM) stops both; if either exits on its own, the other is stopped too.
"""

import os
import signal
import subprocess
import sys
import time

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Run the development web server and the django-q2 cluster until interrupted."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)

    def handle(self, *args, host, port, **options):
        manage = [sys.executable, "manage.py"]
        children = {
            "web": subprocess.Popen([*manage, "runserver", f"{host}:{port}", "--noreload"]),
            "cluster": subprocess.Popen([*manage, "qcluster"]),
        }
        stopping = False

        def stop(signum, frame):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        self.stdout.write(f"Web server on http://{host}:{port}/ and the job cluster are running; Ctrl-C stops both.")
        while not stopping and all(p.poll() is None for p in children.values()):
            time.sleep(0.2)
        for process in children.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM if os.name == "posix" else signal.CTRL_C_EVENT)
        deadline = time.monotonic() + 15
        for name, process in children.items():
            try:
                process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                self.stderr.write(f"{name} did not stop in time; killing it")
                process.kill()
        exited = {n: p.returncode for n, p in children.items()}
        self.stdout.write(f"Stopped ({', '.join(f'{n} exit {c}' for n, c in exited.items())}).")
