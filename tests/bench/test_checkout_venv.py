"""Another checkout runs on the Python its own requirements call for (bench/checkout.py): this
virtualenv when its requirements.txt is this checkout's, else one built from ITS requirements.txt
under a directory named by the file's content and reused; every process of the checkout (its
manage.py and Django snippets, run_platform) starts with that Python. Nothing is installed: the
subprocess calls are recorded, and the build's effect (a bin/python) is faked."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from bench import checkout, common, footprint

MINE = (common.ROOT / "requirements.txt").read_text()


@pytest.fixture
def calls(monkeypatch, tmp_path):
    """The commands checkout runs, each answered by a success; `python -m venv DIR` makes DIR/bin/python."""
    recorded: list[list[str]] = []

    def run(argv, **kwargs):
        recorded.append([str(a) for a in argv])
        if argv[1:3] == ["-m", "venv"]:
            (Path(argv[3]) / "bin").mkdir(parents=True)
            (Path(argv[3]) / "bin" / "python").touch()
        return subprocess.CompletedProcess(argv, 0, stdout="", stderr="")

    monkeypatch.setattr(checkout, "VENVS", tmp_path / "venvs")
    monkeypatch.setattr(checkout.subprocess, "run", run)
    return recorded


def a_checkout(root: Path, requirements: str) -> Path:
    root.mkdir()
    (root / "manage.py").touch()
    (root / "requirements.txt").write_text(requirements)
    return root


def test_a_checkout_with_this_checkouts_requirements_runs_on_this_virtualenv(calls, tmp_path):
    other = a_checkout(tmp_path / "other", MINE)

    assert checkout.interpreter(other) == sys.executable
    assert checkout.Checkout("now", other).executable == sys.executable
    assert calls == []
    assert not (tmp_path / "venvs").exists()


def test_other_requirements_get_a_virtualenv_built_from_them_keyed_by_their_content_and_reused(calls, tmp_path):
    theirs = MINE + "alt-profanity-check==1.9.1\n"
    other = a_checkout(tmp_path / "other", theirs)
    venv = tmp_path / "venvs" / hashlib.sha256(theirs.encode()).hexdigest()

    python = checkout.interpreter(other)

    assert python == str(venv / "bin" / "python")
    assert calls == [
        [sys.executable, "-m", "venv", str(venv)],
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "-r", str(other / "requirements.txt")],
    ]
    assert (venv / "requirements.txt").read_text() == theirs
    # A second run, even from another export of the same code, reuses it.
    calls.clear()
    again = a_checkout(tmp_path / "another-export", theirs)
    assert checkout.interpreter(again) == python
    assert calls == []
    # Other requirements again: another virtualenv.
    third = a_checkout(tmp_path / "third", MINE + "joblib==1.6.0\n")
    assert checkout.interpreter(third) == str(tmp_path / "venvs" / hashlib.sha256(
        (MINE + "joblib==1.6.0\n").encode()).hexdigest() / "bin" / "python")
    assert calls[0][1:3] == ["-m", "venv"] and calls[1][-1] == str(third / "requirements.txt")


def test_a_failed_install_is_a_clear_error_and_the_next_run_builds_again(calls, tmp_path, monkeypatch):
    other = a_checkout(tmp_path / "other", MINE + "no-such-package==0\n")
    recorded = checkout.subprocess.run

    def pip_fails(argv, **kwargs):
        if "pip" in argv:
            recorded(argv, **kwargs)
            return subprocess.CompletedProcess(argv, 1, stdout="", stderr="ERROR: No matching distribution found")
        return recorded(argv, **kwargs)

    monkeypatch.setattr(checkout.subprocess, "run", pip_fails)

    with pytest.raises(checkout.VenvError, match="pip install -r requirements.txt exited 1:\nERROR: No matching"):
        _ = checkout.Checkout("now", other).executable
    calls.clear()
    monkeypatch.setattr(checkout.subprocess, "run", recorded)
    checkout.interpreter(other)
    assert [call[1:3] for call in calls] == [["-m", "venv"], ["-m", "pip"]]  # not taken for built


def test_every_process_of_the_other_checkout_starts_with_its_python(calls, tmp_path, monkeypatch):
    other = checkout.Checkout("now", a_checkout(tmp_path / "other", MINE + "joblib==1.6.0\n"))
    python = other.executable
    calls.clear()

    def answer(argv, **kwargs):
        calls.append([str(a) for a in argv])
        return subprocess.CompletedProcess(argv, 0, stdout="Created (id 7).\ntoken\n[1]\n", stderr="")

    monkeypatch.setattr(checkout.subprocess, "run", answer)
    other.create_client("postgres://x/db", "bench")
    other.python("postgres://x/db", "print(1)", None)
    assert [call[0] for call in calls] == [python, python]
    assert calls[0][1:3] == ["manage.py", "create_api_client"]

    started = []

    class Exited:
        returncode = 1

        def __init__(self, argv, **kwargs):
            started.append((argv, kwargs["cwd"]))

        def poll(self):
            return 1

    monkeypatch.setattr(footprint.subprocess, "Popen", Exited)
    with pytest.raises(RuntimeError, match="run_platform exited"):
        footprint.RunPlatform(other, "postgres://x/db").__enter__()
    assert started[0][0][:3] == [python, "manage.py", "run_platform"] and started[0][1] == other.path


@pytest.mark.parametrize("server", ["granian", "gunicorn"])
def test_the_component_benches_start_the_other_checkouts_web_and_clusters_with_its_python(monkeypatch, tmp_path, server):
    from lab import race_lab

    started = []
    monkeypatch.setattr(race_lab, "start", lambda argv, env, **kwargs: started.append((argv, kwargs["cwd"])))
    monkeypatch.setattr(race_lab, "wait_until_serving", lambda port: None)
    monkeypatch.setattr(race_lab, "LOG_DIR", tmp_path / "logs")
    python = str(tmp_path / "venvs" / "x" / "bin" / "python")

    common.Platform(web_workers=1, clusters=1, code=tmp_path, python=python, server=server).__enter__()

    assert len(started) == 3  # the web server, the moderation and the notification cluster
    assert all(argv[0] == python and cwd == tmp_path for argv, cwd in started)
