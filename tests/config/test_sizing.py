"""Worker counts from the machine (moderation/sizing.py, docs/operations.md "Sizing")."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.test import override_settings
from hypothesis import given
from hypothesis import settings as settings_for_examples
from hypothesis import strategies as st

from moderation import sizing
from moderation.sizing import Machine, Workers
from moderation.services import webhook_gate

GIB = 1024


def write(root, files: dict[str, str]):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture(autouse=True)
def at_the_root(tmp_path, monkeypatch):
    """Unless a test says otherwise, the process sits in its hierarchy's root cgroup (this
    machine's own /proc/self/cgroup would otherwise name groups under the fake roots)."""
    monkeypatch.setattr(sizing, "MEMBERSHIP", write(tmp_path / "proc", {"cgroup": "0::/\n"}) / "cgroup")
    monkeypatch.setattr(sizing.machine, "__defaults__", (sizing.CGROUP, sizing.MEMINFO, sizing.MEMBERSHIP))


@pytest.fixture
def meminfo(tmp_path):
    return write(tmp_path, {"meminfo": "MemTotal:       24683568 kB\nMemFree:  1 kB\n"}) / "meminfo"


def test_a_machine_without_limits_is_its_affinity_and_its_total_memory(tmp_path, meminfo):
    found = sizing.machine(cgroup=write(tmp_path / "cg", {"cpu.max": "max 100000\n", "memory.max": "max\n"}),
                           meminfo=meminfo)
    assert found == Machine(cores=len(os.sched_getaffinity(0)), memory_mib=24683568 // 1024)


@pytest.mark.parametrize(("quota", "cores"), [("150000 100000", 2), ("50000 100000", 1), ("100000 100000", 1)])
def test_a_cgroup_cpu_quota_caps_the_cores(tmp_path, meminfo, quota, cores, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    found = sizing.machine(cgroup=write(tmp_path / "cg", {"cpu.max": quota}), meminfo=meminfo)
    assert found.cores == cores


def test_a_quota_above_the_affinity_leaves_the_affinity(tmp_path, meminfo, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert sizing.machine(cgroup=write(tmp_path / "cg", {"cpu.max": "800000 100000"}), meminfo=meminfo).cores == 2


def test_cgroup_v1_quota_and_memory_limit(tmp_path, meminfo, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(4)))
    cgroup = write(tmp_path / "cg", {"cpu/cpu.cfs_quota_us": "300000", "cpu/cpu.cfs_period_us": "100000",
                                     "memory/memory.limit_in_bytes": str(2 * 1024**3)})
    assert sizing.machine(cgroup=cgroup, meminfo=meminfo) == Machine(cores=3, memory_mib=2 * GIB)
    unlimited = write(tmp_path / "v1", {"cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.cfs_period_us": "100000",
                                        "memory/memory.limit_in_bytes": str(9223372036854771712)})
    assert sizing.machine(cgroup=unlimited, meminfo=meminfo) == Machine(cores=4, memory_mib=24683568 // 1024)


def test_a_container_memory_limit_below_the_host_wins(tmp_path, meminfo):
    found = sizing.machine(cgroup=write(tmp_path / "cg", {"memory.max": str(768 * 1024**2)}), meminfo=meminfo)
    assert found.memory_mib == 768


def test_a_limit_of_the_own_cgroup_or_of_one_above_it_counts(tmp_path, meminfo, monkeypatch):
    """A systemd unit's MemoryMax= (v2) sits in its slice's subtree, not at the root; the
    lowest limit on the way up wins."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    root = write(tmp_path / "cg", {"memory.max": "max", "system.slice/memory.max": str(1024**3),
                                   "system.slice/moderation.service/memory.max": "max",
                                   "system.slice/moderation.service/cpu.max": "200000 100000"})
    membership = write(tmp_path / "p", {"cgroup": "0::/system.slice/moderation.service\n"}) / "cgroup"
    assert sizing.machine(cgroup=root, meminfo=meminfo, membership=membership) == Machine(cores=2, memory_mib=GIB)
    v1 = write(tmp_path / "v1", {"memory/docker/abc/memory.limit_in_bytes": str(512 * 1024**2),
                                 "cpu/docker/abc/cpu.cfs_quota_us": "100000", "cpu/docker/abc/cpu.cfs_period_us": "100000"})
    membership = write(tmp_path / "p1", {"cgroup": "5:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n"}) / "cgroup"
    assert sizing.machine(cgroup=v1, meminfo=meminfo, membership=membership) == Machine(cores=1, memory_mib=512)


def test_unreadable_files_mean_no_memory_cap_not_a_crash(tmp_path):
    found = sizing.machine(cgroup=tmp_path / "absent", meminfo=tmp_path / "absent")
    assert found.memory_mib is None and found.cores >= 1
    garbled = write(tmp_path / "cg", {"cpu.max": "lots\n", "memory.max": "plenty\n", "meminfo": "MemTotal: x kB"})
    assert sizing.machine(cgroup=garbled, meminfo=garbled / "meminfo").memory_mib is None


def test_this_machine_the_defaults():
    """Two cores and 24 GiB: two web workers, two moderation workers, four notification
    workers (two for the slow clients' share, two for a fast client's full concurrency)."""
    assert sizing.workers_for(Machine(cores=2, memory_mib=24 * GIB), slow_share=0.5,
                              client_concurrency=2) == Workers(web=2, moderation=2, notify=4)


def test_notification_workers_follow_the_cores_above_their_floor():
    # 16 cores: each tier stops at TIER_MAX, for the database's connections.
    assert sizing.workers_for(Machine(16, 64 * GIB), slow_share=0.5, client_concurrency=2) == Workers(8, 8, 8)
    assert sizing.workers_for(Machine(6, 64 * GIB), slow_share=0.5, client_concurrency=2) == Workers(6, 6, 6)
    assert sizing.workers_for(Machine(1, None), slow_share=0.5, client_concurrency=2) == Workers(1, 1, 4)
    assert sizing.workers_for(Machine(1, None), slow_share=1, client_concurrency=2).notify == 2


@settings_for_examples(deadline=None)
@given(share=st.floats(0.01, 1), concurrency=st.integers(1, 16))
def test_the_notification_floor_leaves_one_client_its_full_concurrency(share, concurrency):
    """Checked against the gate that enforces the share (moderation/services/webhook_gate.py):
    at the floor, the workers the slow clients may not hold take a fast client's every attempt;
    one worker fewer would not (unless two is as few as the gate can reserve one of)."""
    floor = sizing.notify_floor(share, concurrency)

    def fast_capacity(workers: int) -> int:
        if share >= 1:
            return workers  # no reservation: a fast client may use every worker
        with override_settings(NOTIFY_WORKERS=workers, NOTIFY_SLOW_SHARE=share):
            return workers - webhook_gate.slow_share()

    assert 2 <= floor <= sizing.NOTIFY_FLOOR_MAX or (share >= 1 and floor == concurrency)
    if floor < sizing.NOTIFY_FLOOR_MAX:
        assert fast_capacity(floor) >= concurrency
    else:
        assert fast_capacity(floor) >= 1  # a share this high: the fast clients keep one worker at least
    if 2 < floor < sizing.NOTIFY_FLOOR_MAX and share < 1:
        with override_settings(NOTIFY_WORKERS=floor - 1, NOTIFY_SLOW_SHARE=share):
            slow_fewer = webhook_gate.slow_share()
        with override_settings(NOTIFY_WORKERS=floor, NOTIFY_SLOW_SHARE=share):
            slow_at = webhook_gate.slow_share()
        # One fewer would leave a fast client short, or the slow share below two where the floor has two.
        assert fast_capacity(floor - 1) < concurrency or (slow_fewer < 2 <= slow_at)


def test_a_share_near_one_caps_the_floor_instead_of_asking_for_thousands_of_workers():
    assert sizing.notify_floor(0.999999, 2) == sizing.NOTIFY_FLOOR_MAX
    assert sizing.notify_floor(0.9, 2) == 11  # 11 - 9: two workers left to a fast client
    assert sizing.notify_floor(0.95, 2) == sizing.NOTIFY_FLOOR_MAX  # two left only from 40 workers


def test_short_memory_takes_workers_from_the_largest_tier_first_down_to_the_floors():
    # 16 cores in a 2 GiB container: 1 GiB for the workers.
    counts = sizing.workers_for(Machine(16, 2 * GIB), slow_share=0.5, client_concurrency=2)
    budget = sum(getattr(counts, tier) * mib for tier, mib in sizing.BUDGET_MIB.items())
    assert budget <= GIB and counts.web >= 1 and counts.moderation >= 1 and counts.notify >= 4
    assert counts == Workers(web=3, moderation=2, notify=4)  # 300 + 300 + 400 MiB
    assert sizing.workers_for(Machine(4, 256), slow_share=0.5, client_concurrency=2) == Workers(1, 1, 4)


@given(cores=st.integers(1, 256), memory=st.one_of(st.none(), st.integers(0, 1 << 20)),
       share=st.floats(0.01, 1), concurrency=st.integers(1, 8))
def test_counts_stay_within_the_cores_the_floors_and_the_memory(cores, memory, share, concurrency):
    counts = sizing.workers_for(Machine(cores, memory), slow_share=share, client_concurrency=concurrency)
    floor = sizing.notify_floor(share, concurrency)
    assert 1 <= counts.web <= min(cores, sizing.TIER_MAX) and 1 <= counts.moderation <= min(cores, sizing.TIER_MAX)
    assert floor <= counts.notify <= max(min(cores, sizing.TIER_MAX), floor)
    used = sum(getattr(counts, tier) * mib for tier, mib in sizing.BUDGET_MIB.items())
    at_floors = counts == Workers(1, 1, floor)
    assert memory is None or used <= memory * sizing.MEMORY_SHARE or at_floors


def _settings_counts(**env) -> dict:
    environ = {**os.environ, "DATABASE_URL": os.environ.get("DATABASE_URL", "postgres://x@127.0.0.1/x"), **env}
    for name in ("WEB_CONCURRENCY", "Q_WORKERS", "NOTIFY_WORKERS"):
        if name not in env:
            environ.pop(name, None)
    code = ("import django, json; django.setup(); from django.conf import settings as s; "
            "print(json.dumps([s.WEB_CONCURRENCY, s.Q_WORKERS, s.NOTIFY_WORKERS, s.Q_CLUSTER['workers'], "
            "s.Q_CLUSTER['ALT_CLUSTERS'][s.NOTIFY_CLUSTER]['workers']]))")
    done = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True,
                          cwd=settings.BASE_DIR, timeout=60, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_the_settings_take_the_machines_counts_and_each_variable_overrides_its_own():
    here = sizing.machine(membership=sizing.Path("/proc/self/cgroup"))  # this process's own, as the settings read
    derived = sizing.workers_for(here, slow_share=0.5, client_concurrency=2)
    assert _settings_counts() == [derived.web, derived.moderation, derived.notify, derived.moderation, derived.notify]
    assert _settings_counts(WEB_CONCURRENCY="5", Q_WORKERS="3", NOTIFY_WORKERS="7") == [5, 3, 7, 3, 7]
    assert _settings_counts(Q_WORKERS="1")[1:4:2] == [1, 1]
