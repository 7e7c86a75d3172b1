"""A real PgBouncer in transaction pooling, for `race_lab --pgbouncer` and the pooling tests.

Debian's `pgbouncer` package (installed here when missing, as root), with a configuration of
its own in a temporary directory and a port of its own on loopback, in front of the configured
PostgreSQL: a TCP server, or one on a unix socket only, as the embedded server
(config/embedded_db.py) is. docs/operations.md ("PgBouncer") gives the same settings for production.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

CANDIDATES = ("pgbouncer", "/usr/sbin/pgbouncer")


def installed() -> str | None:
    for candidate in CANDIDATES:
        found = shutil.which(candidate)
        if found:
            return found
    return None


def ensure_installed() -> str:
    """The pgbouncer binary, from Debian's package, installed if missing (needs root and apt)."""
    found = installed()
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in (["apt-get", "install", "-y", "-q", "pgbouncer"], ["apt-get", "update", "-q"],
                        ["apt-get", "install", "-y", "-q", "pgbouncer"]):
            subprocess.run(command, env=env, capture_output=True, timeout=900, check=False)
            if installed():
                return installed()
    raise RuntimeError("PgBouncer is not installed and could not be: run `apt-get install pgbouncer` as root")


def server_address(settings_dict: dict) -> tuple[str, int]:
    """Where a Django database's PostgreSQL listens: (TCP host or unix socket directory, port).
    A URL without a host, as the embedded server's (`postgresql://postgres:@/postgres?host=<dir>`),
    names its socket directory (and port) in the query string, which Django keeps in OPTIONS."""
    options = settings_dict.get("OPTIONS", {})
    host = settings_dict["HOST"] or options.get("host", "")
    return host or "127.0.0.1", int(settings_dict["PORT"] or options.get("port") or 5432)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgBouncer:
    """`with PgBouncer(...) as bouncer:` or start()/stop(). Clients connect to `url(dbname)`."""

    def __init__(self, *, host: str, port: int, user: str, password: str = "", pool_size: int = 10,
                 max_clients: int = 300):
        # A host starting with "/" is a unix socket directory, to pgbouncer as to libpq.
        self.upstream = {"host": host or "127.0.0.1", "port": port or 5432, "user": user, "password": password}
        self.pool_size, self.max_clients = pool_size, max_clients
        self.port = 0
        self.process: subprocess.Popen | None = None
        self.directory: Path | None = None
        self.peaks = {"cl_active": 0, "sv_active": 0, "cl_waiting": 0}

    @classmethod
    def for_database(cls, settings_dict: dict, **kwargs) -> PgBouncer:
        host, port = server_address(settings_dict)
        return cls(host=host, port=port, user=settings_dict["USER"], password=settings_dict["PASSWORD"] or "",
                   **kwargs)

    def url(self, dbname: str) -> str:
        return f"postgresql://{self.upstream['user']}@127.0.0.1:{self.port}/{dbname}"

    def start(self) -> PgBouncer:
        binary = ensure_installed()
        self.directory = Path(tempfile.mkdtemp(prefix="lab-pgbouncer-"))
        self.directory.chmod(0o755)  # pgbouncer drops root for `nobody`, who must read its files
        self.port = _free_port()
        config = self.directory / "pgbouncer.ini"
        upstream = " ".join(f"{k}={v}" for k, v in self.upstream.items() if v)
        config.write_text(
            "[databases]\n"
            f"* = {upstream}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            # Clients are this machine's lab processes on loopback; pgbouncer logs in upstream with
            # the configured credentials.
            f"auth_type = trust\nauth_file = {self.directory / 'userlist.txt'}\n"
            f"admin_users = {self.upstream['user']}\n"
            # The mode the platform supports (docs/operations.md, "PgBouncer"): a server
            # connection per transaction, so fewer server connections than clients.
            "pool_mode = transaction\n"
            f"default_pool_size = {self.pool_size}\nmax_client_conn = {self.max_clients}\n"
            # psycopg sends no startup option pgbouncer refuses; `options` (e.g. -c
            # statement_timeout) is deliberately *not* ignored: it would be dropped silently.
            "ignore_startup_parameters = extra_float_digits\n"
            "server_reset_query =\n"
        )
        (self.directory / "userlist.txt").write_text(f'"{self.upstream["user"]}" ""\n')
        for path in self.directory.iterdir():
            path.chmod(0o644)
        command = [binary, str(config)]
        if os.geteuid() == 0:
            command[1:1] = ["-u", self._system_user()]  # it refuses to run as root
        log = (self.directory / "pgbouncer.log").open("wb")
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self._wait_ready()
        return self

    def _system_user(self) -> str:
        """Whom pgbouncer runs as when started by root. `nobody` in front of a TCP server; in front
        of a unix socket, the socket's owner, the server's own user: the embedded server keeps its
        socket in its data directory, which only that user may enter (pgserver runs it as
        `pgserver` under root)."""
        if not self.upstream["host"].startswith("/"):
            return "nobody"
        socket_path = Path(self.upstream["host"]) / f".s.PGSQL.{self.upstream['port']}"
        return pwd.getpwuid(socket_path.stat().st_uid).pw_name

    def _wait_ready(self, timeout_s: float = 15) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                psycopg.connect(self.url("pgbouncer"), autocommit=True, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    log = (self.directory / "pgbouncer.log").read_text(errors="replace")[-2000:]
                    self.stop()
                    raise RuntimeError(f"PgBouncer did not start:\n{log}") from None
                time.sleep(0.2)

    def admin(self, command: str) -> list[dict]:
        """A command of PgBouncer's admin console (SHOW POOLS, SHOW STATS...), as rows."""
        with psycopg.connect(self.url("pgbouncer"), autocommit=True, cursor_factory=psycopg.ClientCursor) as conn:
            cursor = conn.execute(command)
            names = [d.name for d in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def sample(self, dbname: str) -> None:
        """Keep the peaks of active clients, server connections in use, and waiting clients."""
        for pool in self.admin("SHOW POOLS"):
            if pool["database"] == dbname:
                for key in self.peaks:
                    self.peaks[key] = max(self.peaks[key], int(pool[key]))

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def __enter__(self) -> PgBouncer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
