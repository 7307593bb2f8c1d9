"""How many CPU threads the interpreter's kernels use: chosen for a machine that is shared.

torch's default intra-op pool has one thread per core, and its OpenMP workers spin while
they wait for each other. On a machine whose cores are also busy with something else (a
build, other users, the Studio's own UI thread and workers) a spinning worker that loses its
core holds up every kernel of the pool: measured on a 2-core machine with one core taken,
bert_tiny ran at a median 10 ms per run with 2 threads and 1.7 ms with 1 (issue 15 saw
21–79× on convolution and attention files). One thread per *free* core avoids that cliff,
and on small models a second thread buys little even when the machine is quiet.

:func:`choose` decides; :func:`apply` sets it in torch. The interpreter (``nac_engine.runtime``) applies the
automatic choice when a :class:`~nac_engine.runtime.session.Session` starts running, so
the count follows the load the machine has then; a count set by the user wins:

* ``NAC_NUM_THREADS`` (or ``OMP_NUM_THREADS``, which torch itself reads) in the environment;
* :func:`pin` from the program, or ``torch.set_num_threads`` called after a run began
  (seen on the next run, and kept from then on);
* ``torch.set_num_threads`` called by the program before the first run: at the first run, a
  count other than torch's own default (one thread per physical core) is the program's, and
  kept. (A program that sets exactly torch's default cannot be told from one that set nothing;
  it gets the automatic choice, as any program that did not choose.)

The Studio's engine host reserves one core for the window's UI thread (``reserve(1)``). This module imports torch
only when it sets the count, so the Studio can configure it before torch is loaded.
"""
from __future__ import annotations

import os
import threading
from typing import Optional

_lock = threading.Lock()
_pinned: Optional[int] = None      # the count the program asked for (apply(n) / pin(n))
_reserved = 0                      # cores kept free for the host application (the Studio's UI)
_applied: Optional[int] = None     # what we last gave torch


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def physical_cores() -> int:
    """Physical cores of the CPUs this process may use (torch's default thread count comes from
    the same count); the usable CPUs where the topology is not readable."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    cores = set()
    for cpu in cpus:
        base = f"/sys/devices/system/cpu/cpu{cpu}/topology/"
        try:
            with open(base + "physical_package_id") as a, open(base + "core_id") as b:
                cores.add((a.read().strip(), b.read().strip()))
        except OSError:
            return usable_cpus()
    return len(cores) or usable_cpus()


def busy_cpus() -> float:
    """Cores other work keeps busy: the 1-minute load average, which counts runnable
    threads machine-wide (ours included while we run, so it errs towards fewer threads)."""
    try:
        return max(0.0, os.getloadavg()[0])
    except (AttributeError, OSError):
        return 0.0


def _from_environment() -> Optional[int]:
    for name in ("NAC_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value:
            try:
                n = int(value)
            except ValueError:
                continue
            if n >= 1:
                return n
    return None


def choose(cpus: Optional[int] = None, busy: Optional[float] = None, reserved: Optional[int] = None) -> int:
    """The thread count for kernels: the free cores, at least 1.

    ``cpus`` usable cores (default: the affinity mask), ``busy`` cores other work holds
    (default: the load average), ``reserved`` cores the host keeps for itself (default:
    what :func:`reserve` set). Machines with 2 cores or fewer always get 1 thread: one
    other runnable thread is enough to stall a 2-thread pool, and the quiet-machine gain
    is small for the models an interpreter steps through.
    """
    cpus = usable_cpus() if cpus is None else max(1, int(cpus))
    busy = busy_cpus() if busy is None else max(0.0, float(busy))
    reserved = _reserved if reserved is None else max(0, int(reserved))
    if cpus <= 2:
        return 1
    free = cpus - reserved - int(busy + 0.5)
    return max(1, min(cpus - reserved, free))


def reserve(cores: int) -> None:
    """Keep ``cores`` out of the automatic choice (the Studio: 1, for its UI thread)."""
    global _reserved
    _reserved = max(0, int(cores))


def pin(n: Optional[int]) -> None:
    """Fix the count (``None`` returns to the automatic choice) and apply it now."""
    global _pinned
    with _lock:
        _pinned = None if n is None else max(1, int(n))
    if n is not None:
        apply(n)


def apply(n: Optional[int] = None) -> int:
    """Give torch ``n`` threads, or the count the environment, :func:`pin` or
    :func:`choose` gives. Cheap when nothing changes (called once per ``Session.run``)."""
    global _applied, _pinned
    import torch
    with _lock:
        have = torch.get_num_threads()
        if n is None and _pinned is None:
            if _applied is not None and have != _applied:
                _pinned = have    # torch.set_num_threads was called since we last chose: theirs wins
            elif (_applied is None and _from_environment() is None and have != usable_cpus()
                  and have != physical_cores()):      # (the topology's files last: 0.2 ms to read)
                _pinned = have    # set before our first run (torch starts at one per physical core)
        if n is None:
            n = _pinned or _from_environment() or choose()
        if n != have:
            torch.set_num_threads(n)
        _applied = n
    return n


def current() -> int:
    import torch
    return torch.get_num_threads()
