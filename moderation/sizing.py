"""Worker counts derived from the machine (docs/operations.md, "Sizing").

The web workers and the moderation workers run Python on the cores, beside PostgreSQL on a
small machine: one of each per usable core. The notification workers wait on clients'
receivers, not on the cores: there are as many as the cores, but never fewer than it takes
for the slow clients' share of them (NOTIFY_SLOW_SHARE, at least one worker) to leave one
client's full concurrency (NOTIFY_CLIENT_CONCURRENCY) to the fast clients, the slow share
itself holding two where it can (a hanging receiver must not hold back every new client). All of them
together get at most half of the machine's memory (the rest is PostgreSQL's, the page cache's
and the system's), each budgeted at its goal (a web worker 100 MiB, a moderation worker with
the local model 150 MiB, a notification worker 100 MiB); over that, the largest tier gives up a
worker first. A derived count stops at TIER_MAX (8) per tier, for the database's connections.
WEB_CONCURRENCY, Q_WORKERS and NOTIFY_WORKERS override each count.

Usable cores are the CPUs this process may run on (its affinity), fewer under a CPU quota of
its cgroup or of one above it; memory is the machine's, less under such a memory limit: a
container or a systemd unit with `MemoryMax=` is sized by its limits, not by its host.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

MIB = 1024 * 1024
BUDGET_MIB = {"web": 100, "moderation": 150, "notify": 100}  # per worker (docs/benchmarks.md goals)
NOTIFY_FLOOR_MAX = 16
SLOW_SHARE_FLOOR = 2
# Derived counts stop here (each tier): every worker holds a database connection, and 8 + 8 +
# 8 workers with the clusters' own stay well within PostgreSQL's default max_connections (100).
# More is an operator's choice, with the variables.
TIER_MAX = 8
MEMORY_SHARE = 0.5  # of the machine's memory, for all the workers together
CGROUP = Path("/sys/fs/cgroup")
MEMINFO = Path("/proc/meminfo")
MEMBERSHIP = Path("/proc/self/cgroup")


@dataclass(frozen=True)
class Machine:
    cores: int
    memory_mib: int | None  # None: unknown, no memory cap


@dataclass(frozen=True)
class Workers:
    web: int
    moderation: int
    notify: int


def machine(cgroup: Path = CGROUP, meminfo: Path = MEMINFO, membership: Path = MEMBERSHIP) -> Machine:
    """This process's usable cores and memory: the lowest limit of its own cgroup and of every
    cgroup above it (a systemd unit's `MemoryMax=` or `CPUQuota=` sits below the root)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    groups = _own_cgroups(membership)
    quotas = [q for q in (_cpu_quota(cgroup, group) for group in groups) if q is not None]
    if quotas:
        cores = min(cores, max(1, math.ceil(min(quotas))))
    limits = [_memory_limit(cgroup, group) for group in groups]
    known = [size for size in (_meminfo_total(meminfo), *limits) if size]
    return Machine(cores=max(1, cores), memory_mib=min(known) // MIB if known else None)


def _own_cgroups(membership: Path) -> list[Path]:
    """The process's cgroups (from /proc/self/cgroup: v2's `0::<path>`, v1's cpu and memory
    lines) and every one above each, as paths relative to the hierarchy's root."""
    paths = {"/"}
    try:
        for line in membership.read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controllers == "" or {"cpu", "memory"} & set(controllers.split(",")):
                paths.add(path)
    except (OSError, ValueError):
        pass
    groups: list[Path] = []
    for path in sorted(paths):
        parts = [part for part in path.split("/") if part and part not in (".", "..")]
        for depth in range(len(parts), -1, -1):
            if (group := Path(*parts[:depth])) not in groups:
                groups.append(group)
    return groups


def slow_share_of(workers: int, slow_share: float) -> int:
    """Notification workers the slow clients may hold together (at least one): what
    moderation/services/webhook_gate.py enforces across every process."""
    return max(1, math.floor(workers * slow_share))


def notify_floor(slow_share: float, client_concurrency: int) -> int:
    """The fewest notification workers whose share left to fast clients holds one client's
    full concurrency (with no reservation, NOTIFY_SLOW_SHARE 1: that concurrency itself), at
    most NOTIFY_FLOOR_MAX: a share so high that it would need more leaves the fast clients
    fewer workers than one client's concurrency (always at least one), as its operator chose."""
    if slow_share >= 1:
        return min(NOTIFY_FLOOR_MAX, max(1, client_concurrency))
    def slow(workers: int) -> int:
        return slow_share_of(workers, slow_share)

    fits = [n for n in range(2, NOTIFY_FLOOR_MAX + 1) if n - slow(n) >= client_concurrency]
    # The slow share holds two at least where it can: one receiver that hangs must not hold back
    # every new client (a client with no attempt yet counts as slow).
    both = [n for n in fits if slow(n) >= SLOW_SHARE_FLOOR]
    return (both or fits or [NOTIFY_FLOOR_MAX])[0]


def workers_for(machine: Machine, *, slow_share: float, client_concurrency: int) -> Workers:
    floors = {"web": 1, "moderation": 1, "notify": notify_floor(slow_share, client_concurrency)}
    cores = min(machine.cores, TIER_MAX)
    counts = {"web": cores, "moderation": cores, "notify": max(cores, floors["notify"])}
    budget = math.inf if machine.memory_mib is None else machine.memory_mib * MEMORY_SHARE
    while sum(counts[t] * BUDGET_MIB[t] for t in counts) > budget:
        shrinkable = [t for t in counts if counts[t] > floors[t]]
        if not shrinkable:
            break  # the floors are what the platform needs to run at all
        largest = max(shrinkable, key=lambda t: (counts[t] * BUDGET_MIB[t], t))
        counts[largest] -= 1
    return Workers(**counts)


def _cpu_quota(root: Path, group: Path) -> float | None:
    """The group's CPU quota in cores: cgroup v2 `cpu.max` ("max 100000" or "<quota> <period>"),
    or v1's cfs files; None when unlimited or unreadable."""
    try:
        quota, period = (root / group / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota = int((root / "cpu" / group / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / group / "cpu.cfs_period_us").read_text())
        return None if quota <= 0 or period <= 0 else quota / period
    except (OSError, ValueError):
        return None


def _memory_limit(root: Path, group: Path) -> int | None:
    """The group's memory limit in bytes: v2 `memory.max` or v1 `memory.limit_in_bytes`; None
    when unlimited or unreadable."""
    for path in (root / group / "memory.max", root / "memory" / group / "memory.limit_in_bytes"):
        try:
            value = path.read_text().strip()
        except OSError:
            continue
        if value == "max" or not value.isdigit():
            return None
        limit = int(value)
        return None if limit >= 1 << 60 else limit  # v1 writes "unlimited" as a huge number
    return None


def _meminfo_total(meminfo: Path) -> int | None:
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
