"""The code a benchmark measures: this checkout ("after") or another one ("now", the tag
`bench-now` by default), measured in the same run so the machine's drift hits both alike.

Another checkout's schema may differ from this one's, so everything that touches its database
runs ITS code in a subprocess (cwd = the checkout, with `Checkout.executable`): `manage.py migrate`,
`manage.py create_api_client`, its own `bench.common` seeding and its own invariant checker
(`moderation.invariants.violations`). The driver itself reads only the stable columns
(moderation_contentreview.status, created_at, completed_at) and talks to the platform over HTTP.

Each checkout gets a template database migrated once (`<BENCH_DATABASE>_<label>_template`) and
every run a fresh copy of it (`CREATE DATABASE ... TEMPLATE`), so a run's rows are all its own.

Its dependencies may differ too (the code before issue 47 ran alt-profanity-check, which this
checkout no longer installs): a checkout whose requirements.txt is not this one's runs on a
virtualenv of its own, built from ITS requirements.txt under var/bench-venvs/<sha256 of the file>
(git ignores var/) the first time it is needed and reused by every later run (`interpreter`).
Every process of that checkout (migrate, create_api_client, its Django snippets, run_platform
and what run_platform starts with its own sys.executable) runs on that virtualenv's Python.
"""

from __future__ import annotations

import atexit
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bench import common

NOW_TAG = "bench-now"
# The commit the tag names: the last before issue 17 (tags may not travel with a clone or a push).
NOW_COMMIT = "aafe7cba10bea344f4634038c0b98986785326f1"
# The virtualenvs of other checkouts whose requirements differ from this one's (git ignores var/).
VENVS = common.ROOT / "var" / "bench-venvs"


@dataclass
class Checkout:
    label: str  # "after" (this checkout) or "now"
    path: Path
    commit: str = ""
    _template: str = field(default="", repr=False)
    _executable: str = field(default="", repr=False)

    @property
    def is_this(self) -> bool:
        return self.path.resolve() == common.ROOT.resolve()

    @property
    def executable(self) -> str:
        """The Python that runs this checkout's processes: this one's, or a virtualenv built from
        its own requirements.txt when that differs (`interpreter`; built on first use)."""
        if not self._executable:
            self._executable = sys.executable if self.is_this else interpreter(self.path)
        return self._executable

    def env(self, database_url: str, **extra: str) -> dict[str, str]:
        return {**os.environ, **common.PRODUCTION_ENV, "DATABASE_URL": database_url,
                "DJANGO_SETTINGS_MODULE": "config.settings", **extra}

    def _run(self, argv: list[str], database_url: str, *, stdin: str = "", what: str, env: dict | None = None) -> str:
        run = subprocess.run([self.executable, *argv], cwd=self.path, env=self.env(database_url, **(env or {})), input=stdin,
                             capture_output=True, text=True)
        if run.returncode:
            raise RuntimeError(f"{what} failed in the {self.label} checkout ({self.path}), exit {run.returncode}:\n"
                               f"{run.stderr.strip()[-3000:]}")
        return run.stdout

    def template(self) -> str:
        """The migrated template database of this checkout (created on first use)."""
        if not self._template:
            name = f"{common.BENCH_DB}_{self.label}_template"
            _recreate(name)
            self._run(["manage.py", "migrate", "--no-input", "-v", "0"], _url(name), what="manage.py migrate")
            self._template = name
        return self._template

    def database(self, run: str) -> str:
        """A fresh database for one run, copied from the template; its URL."""
        name = f"{common.BENCH_DB}_{self.label}_{run}"
        _recreate(name, template=self.template())
        return _url(name)

    def create_client(self, database_url: str, name: str, webhook_url: str = "") -> tuple[int, str]:
        """An API client made by the checkout's `manage.py create_api_client`: (id, token)."""
        out = self._run(["manage.py", "create_api_client", name, *(["--webhook-url", webhook_url] if webhook_url else [])],
                        database_url, what="create_api_client",
                        # a loopback receiver (bench.ingest --notify) is refused without it
                        env={"WEBHOOK_ALLOW_PRIVATE": "1"} if webhook_url else None).strip().splitlines()
        client_id = int(out[0].rsplit("(id ", 1)[1].rstrip(").")) if "(id " in out[0] else 0
        if not client_id:
            raise RuntimeError(f"create_api_client printed no client id: {out[0]!r}")
        return client_id, out[-1].strip()

    def python(self, database_url: str, code: str, data, env: dict | None = None) -> object:
        """Run `code` with the checkout's Django set up on `database_url` (and `env`); it reads
        `data` (JSON) as `data` and its last printed line is the answer (JSON)."""
        program = ("import json, sys, django\ndjango.setup()\ndata = json.load(sys.stdin)\n" + code)
        out = self._run(["-c", program], database_url, stdin=json.dumps(data), what="a benchmark step", env=env)
        return json.loads(out.strip().splitlines()[-1])

    def violations(self, database_url: str, review_ids: list[str]) -> list[str]:
        """The checkout's invariant checker on these reviews (docs/design.md, "Invariants")."""
        return self.python(database_url, "from moderation.invariants import violations\n"
                                         "print(json.dumps(violations(data)))", [str(r) for r in review_ids])

    def seed_processing(self, database_url: str, client_id: int, n: int, tag: str) -> list[tuple[str, str]]:
        """The checkout's own `bench.common.seed_processing`: (review id, idempotency key) pairs."""
        rows = self.python(database_url, "from bench import common\n"
                                         "rows = common.seed_processing(data['client'], data['n'], data['tag'])\n"
                                         "print(json.dumps([[str(r), str(k)] for r, k in rows]))",
                           {"client": client_id, "n": n, "tag": tag})
        return [tuple(row) for row in rows]


class VenvError(RuntimeError):
    """The virtualenv of another checkout could not be built (the message says which step)."""


def interpreter(path: Path) -> str:
    """The Python to run the checkout at `path` with: this virtualenv's when its requirements.txt
    is byte for byte this checkout's (or it has none), else the one of a virtualenv built from
    ITS requirements.txt, in VENVS/<sha256 of that file> (built once, under a lock; a build that
    failed half-way is started again). VenvError when the build fails."""
    theirs = Path(path) / "requirements.txt"
    if not theirs.exists() or theirs.read_bytes() == (common.ROOT / "requirements.txt").read_bytes():
        return sys.executable
    requirements = theirs.read_bytes()
    venv = VENVS / hashlib.sha256(requirements).hexdigest()
    python, stamp = venv / "bin" / "python", venv / ".installed"
    VENVS.mkdir(parents=True, exist_ok=True)
    with open(VENVS / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run building the same one: wait for it, then reuse it
        if stamp.exists() and python.exists():
            return str(python)
        shutil.rmtree(venv, ignore_errors=True)
        print(f"building a virtualenv for {path} from its requirements.txt (it differs from this checkout's): "
              f"{venv}", flush=True)
        _step([sys.executable, "-m", "venv", str(venv)], "python -m venv", path)
        (venv / "requirements.txt").write_bytes(requirements)  # a record of what it was built from
        _step([str(python), "-m", "pip", "install", "--quiet", "-r", str(theirs)],
              "pip install -r requirements.txt", path)
        stamp.touch()
    return str(python)


def _step(argv: list[str], what: str, path: Path) -> None:
    run = subprocess.run(argv, cwd=path, capture_output=True, text=True)
    if run.returncode:
        raise VenvError(f"the virtualenv for {path} could not be built: {what} exited {run.returncode}:\n"
                        f"{(run.stderr or run.stdout).strip()[-3000:]}")


def this() -> Checkout:
    return Checkout("after", common.ROOT, commit=_git("rev-parse", "--short", "HEAD") or "")


def now(ref: str = NOW_TAG, directory: str | None = None) -> tuple[Checkout | None, str]:
    """The code before the change: `directory` if given, else `ref` exported from this
    repository into a temporary directory (`git archive`, which leaves the repository as it was).
    (None, why) when it cannot be had."""
    if directory:
        path = Path(directory).resolve()
        if not (path / "manage.py").exists():
            return None, f"{path} is not a checkout of the project (no manage.py)"
        return Checkout("now", path, commit=_git("rev-parse", "--short", "HEAD", cwd=path) or "?"), ""
    if not shutil.which("git"):
        return None, "git is not installed"
    commit = _git("rev-parse", "--short", f"{ref}^{{commit}}")
    if not commit and ref == NOW_TAG:  # no tag here: the commit it names, if the history has it
        ref = NOW_COMMIT
        commit = _git("rev-parse", "--short", f"{ref}^{{commit}}")
    if not commit:
        return None, f"no {ref!r} in this repository"
    temporary = Path(tempfile.mkdtemp(prefix="bench-now-"))
    atexit.register(shutil.rmtree, temporary, ignore_errors=True)
    target = temporary / "code"
    target.mkdir()
    archive = subprocess.run(["git", "-C", str(common.ROOT), "archive", "--format=tar", ref], capture_output=True)
    if archive.returncode:
        return None, f"git archive {ref} failed: {archive.stderr.decode().strip()}"
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return Checkout("now", target, commit=commit), ""


def _git(*args: str, cwd: Path | None = None) -> str:
    try:
        run = subprocess.run(["git", "-C", str(cwd or common.ROOT), *args], capture_output=True, text=True)
    except FileNotFoundError:
        return ""
    return run.stdout.strip() if run.returncode == 0 else ""


def _url(name: str) -> str:
    return common.with_database(common.server_url(), name)


def _recreate(name: str, template: str = "") -> None:
    import psycopg

    with psycopg.connect(common.admin_url(), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))


def query(database_url: str, statement: str, params=None) -> list[tuple]:
    """One statement on a run's database, outside Django (the driver reads stable columns only)."""
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as conn:
        cursor = conn.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def database_name(database_url: str) -> str:
    """The database a URL names (the embedded server's URLs carry their socket as a query)."""
    from urllib.parse import urlsplit

    return urlsplit(database_url).path.lstrip("/")


def drop(database_url: str) -> None:
    import psycopg

    name = database_name(database_url)
    with psycopg.connect(common.admin_url(), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def add_arguments(parser) -> None:
    parser.add_argument("--now", action="store_true",
                        help=f"also measure the code before the change (the tag {NOW_TAG}, exported to a temp dir)")
    parser.add_argument("--code", metavar="DIR", help="the 'now' checkout to measure instead of the tag (implies --now)")


def chosen(args, *, now_default: bool = False) -> list[Checkout]:
    """This checkout, and before it the 'now' one if asked for and available (else a note why)."""
    checkouts = [this()]
    if args.code or getattr(args, "now", False) or now_default:
        before, why = now(directory=args.code)
        if before is None:
            print(f"'now' not measured: {why}", flush=True)
        else:
            checkouts.insert(0, before)
    return checkouts
