"""Several processes on one machine, talking through ``torch.distributed``: plan them, start them, read them.

- :func:`plan_processes` picks the backend and the number of processes from the GPUs present, with the
  reason: NCCL with one process per CUDA GPU where there are enough GPUs, else gloo with CPU processes;
- :func:`torchrun_command` writes the ``torchrun`` command line for one node, with its rendezvous at
  127.0.0.1 and each rank's output going to a file of its own;
- :func:`run_torchrun` runs it with the rendezvous and the backends on the loopback interface, inside a
  loopback-only network namespace where one can be made (:func:`loopback_namespace`), waits at most
  ``timeout`` seconds, stops every process it started if they overrun, and returns a
  :class:`DistributedRun` with each rank's output;
- :func:`free_port` finds a free TCP port on 127.0.0.1, and :func:`worker_env` the variables that keep the
  backends on loopback.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from gpukit.base.arguments import require_positive, require_whole_number
from gpukit.base.errors import error_line, first_line
from gpukit.base.paths import LOOPBACK, state_dir
from gpukit.core.device import cuda_available, mps_available


# ------------------------------------------------------------------------------------------ planning
@dataclass(frozen=True)
class Plan:
    """How many processes to start, on which backend and device kind, and why."""

    backend: str
    world_size: int
    device: str
    reason: str

    def __str__(self) -> str:
        return (f"{self.world_size} processes on {self.device.upper()}, backend {self.backend}: "
                f"{self.reason}")


def _gpu_facts() -> tuple[int, bool, bool]:
    """(CUDA GPUs PyTorch sees, whether this PyTorch has NCCL, whether an Apple GPU is present)."""
    import torch
    import torch.distributed as dist

    gpus = torch.cuda.device_count() if cuda_available() else 0
    return gpus, bool(dist.is_available() and dist.is_nccl_available()), mps_available()


def plan_processes(wanted: int, *, gpus: int | None = None, nccl: bool | None = None,
                   mps: bool | None = None) -> Plan:
    """The plan for a cell that wants ``wanted`` processes, one per GPU.

    With at least ``wanted`` CUDA GPUs and a PyTorch that has NCCL: ``wanted`` processes on NCCL, one per
    GPU. Otherwise ``wanted`` CPU processes on gloo, and the reason says what was missing. ``gpus``, ``nccl``
    and ``mps`` override what this machine reports (for tests and for planning another machine).
    """
    require_whole_number("the number of processes wanted", wanted, 1)
    found_gpus, found_nccl, found_mps = _gpu_facts() if None in (gpus, nccl, mps) else (0, False, False)
    gpus = found_gpus if gpus is None else gpus
    nccl = found_nccl if nccl is None else nccl
    mps = found_mps if mps is None else mps
    require_whole_number("the number of GPUs", gpus, 0)
    if gpus >= wanted and nccl:
        return Plan("nccl", wanted, "cuda", f"{gpus} CUDA GPU(s) here, so one process per GPU on NCCL")
    if gpus >= wanted:
        why = f"{gpus} CUDA GPU(s) here, but this PyTorch was built without NCCL"
    elif gpus:
        why = f"only {gpus} CUDA GPU(s) here and the cell wants {wanted}"
    elif mps:
        why = "the GPU here is an Apple GPU (MPS), and NCCL is for NVIDIA GPUs"
    else:
        why = "no CUDA GPU here"
    return Plan("gloo", wanted, "cpu", f"{why}, so CPU processes on gloo instead")


# ------------------------------------------------------------------------------------------ network
def free_port(host: str = LOOPBACK) -> int:
    """A TCP port that is free on ``host`` now (the system picks it; another program may take it later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def loopback_interface() -> str:
    """The name of the loopback interface: ``lo`` on Linux, ``lo0`` on macOS and the BSDs."""
    return "lo" if sys.platform.startswith("linux") else "lo0"


def worker_env(threads: int = 1) -> dict[str, str]:
    """Variables for the worker processes: rendezvous on 127.0.0.1, gloo and NCCL on the loopback interface,
    ``threads`` CPU threads each (so that N processes do not fight over the cores), output unbuffered."""
    require_whole_number("the threads per process", threads, 1)
    interface = loopback_interface()
    return {"MASTER_ADDR": LOOPBACK, "GLOO_SOCKET_IFNAME": interface, "NCCL_SOCKET_IFNAME": interface,
            "OMP_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1"}


@functools.lru_cache(maxsize=1)
def loopback_namespace() -> tuple[tuple[str, ...] | None, str]:
    """A command prefix that runs its command in a new network namespace where only loopback exists.

    Returns ``(prefix, "")`` where such a namespace can be made (Linux, as root or with user namespaces),
    else ``(None, why not)``. Inside it nothing that ``torchrun`` opens can be reached from outside.
    """
    if not sys.platform.startswith("linux"):
        return None, "network namespaces exist on Linux only"
    unshare, ip = shutil.which("unshare"), shutil.which("ip")
    if not unshare or not ip:
        return None, "the unshare and ip commands (util-linux, iproute2) are not installed"
    flag = "-n" if os.geteuid() == 0 else "-rn"
    prefix = (unshare, flag, "sh", "-c", f'{ip} link set lo up && exec "$@"', "sh")
    try:
        probe = subprocess.run([*prefix, "true"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return None, f"unshare did not work here ({error_line(error)})"
    if probe.returncode != 0:
        return None, f"network namespaces are not allowed here ({first_line(probe.stderr) or probe.returncode})"
    return prefix, ""


# ------------------------------------------------------------------------------------------ running
def torchrun_command(script, *args, nproc: int, log_dir, port: int | None = None) -> list[str]:
    """``python -m torch.distributed.run`` (the ``torchrun`` command) for ``nproc`` processes on this node.

    The rendezvous (``--rdzv-backend c10d``) is at ``127.0.0.1:port`` (a free port if ``port`` is None), and
    ``--local-addr`` makes the workers' ``MASTER_ADDR`` 127.0.0.1 too: ``--standalone`` would do the same
    with ``localhost``, which some machines resolve to an IPv6 address first. ``--max-restarts 0`` makes a
    failing rank end the run instead of restarting it; ``--log-dir`` with ``--redirects 3`` writes each
    rank's output to ``<log_dir>/<run>/attempt_0/<rank>/stdout.log`` (and ``stderr.log``).
    """
    require_whole_number("the number of processes", nproc, 1)
    port = free_port() if port is None else require_whole_number("the port", port, 1)
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", str(nproc),
            "--rdzv-backend", "c10d", "--rdzv-endpoint", f"{LOOPBACK}:{port}", "--local-addr", LOOPBACK,
            "--max-restarts", "0", "--log-dir", str(log_dir), "--redirects", "3", str(script),
            *map(str, args)]


@dataclass(frozen=True)
class DistributedRun:
    """How a group of processes ended: the launcher's exit status and output, each rank's output."""

    returncode: int
    stdout: dict[int, str]
    stderr: dict[int, str]
    launcher_output: str
    seconds: float
    where: str
    command: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def world_size(self) -> int:
        return len(self.stdout)

    def command_line(self) -> str:
        """The command as one would type it: ``torchrun ...`` with the script's file name only."""
        words = list(self.command)
        if words[1:3] == ["-m", "torch.distributed.run"]:
            words[:3] = ["torchrun"]
        log_dir = words.index("--log-dir") + 1 if "--log-dir" in words else None
        if log_dir is not None:
            words[log_dir] = "LOGS"
        script = next((i for i, w in enumerate(words) if w.endswith(".py")), None)
        if script is not None:
            words[script] = Path(words[script]).name
        return " ".join(words)

    def records(self) -> list[dict]:
        """Every line of every rank's output that is a JSON object, with its ``rank`` added, rank by rank."""
        found = []
        for rank in sorted(self.stdout):
            for line in self.stdout[rank].splitlines():
                line = line.strip()
                if line.startswith("{") and line.endswith("}"):
                    found.append({"rank": rank, **json.loads(line)})
        return found

    def table(self):
        """:meth:`records` as a pandas DataFrame indexed by rank."""
        import pandas as pd

        return pd.DataFrame(self.records()).set_index("rank")

    def first_failure(self) -> tuple[int, int | None, str] | None:
        """torchrun's "Root Cause" of a failed run: (the rank, its exit code, the account in one line, ``rank 1:
        exit code -11, Signal 11 (SIGSEGV) received by PID 4242``), or None when the launcher printed none. A
        negative exit code is minus the signal that ended the rank."""
        block = self.launcher_output.partition("Root Cause")[2]
        fields = dict(re.findall(r"^\s*(rank|exitcode|traceback)\s*:\s*(.*?)\s*$", block, re.M))
        if "rank" not in fields or not fields["rank"].split()[0].isdigit():
            return None
        rank = int(fields["rank"].split()[0])
        code = fields.get("exitcode", "?").split()[0]
        how = fields.get("traceback", "")
        how = "" if how.startswith(("<N/A>", "To enable traceback")) else f", {how}"
        exit_code = int(code) if code.lstrip("-").isdigit() else None
        return rank, exit_code, f"rank {rank}: exit code {code}{how}"

    def root_cause(self) -> str | None:
        """The account of :meth:`first_failure`, or None."""
        failure = self.first_failure()
        return failure[2] if failure else None

    def failure(self) -> str:
        """What went wrong, for an error message: torchrun's first rank to fail, the last lines of the ranks that
        wrote an error, else the launcher's last lines."""
        parts = [f"the processes ended with exit status {self.returncode}"]
        cause = self.root_cause()
        if cause:
            parts.append(f"first to fail, {cause}")
        for rank in sorted(self.stderr):
            tail = self.stderr[rank].strip().splitlines()[-5:]
            if tail and any("Error" in line or "error" in line for line in tail):
                parts.append(f"rank {rank}:\n" + "\n".join(tail))
        if len(parts) == 1:
            parts.append("launcher:\n" + "\n".join(self.launcher_output.strip().splitlines()[-10:]))
        return "\n".join(parts)

    def check(self) -> DistributedRun:
        """Return the run if every process succeeded, else raise ``RuntimeError`` with :meth:`failure`."""
        if not self.ok:
            raise RuntimeError(self.failure())
        return self


def _read_rank_logs(log_dir: Path) -> tuple[dict[int, str], dict[int, str]]:
    stdout, stderr = {}, {}
    attempts = sorted(log_dir.glob("*/attempt_*"), key=lambda p: (p.stat().st_mtime, p.name))
    if not attempts:
        return stdout, stderr
    for rank_dir in attempts[-1].iterdir():
        if rank_dir.is_dir() and rank_dir.name.isdigit():
            rank = int(rank_dir.name)
            for name, into in (("stdout.log", stdout), ("stderr.log", stderr)):
                path = rank_dir / name
                into[rank] = path.read_text(errors="replace") if path.is_file() else ""
    return stdout, stderr


def _stop_group(process: subprocess.Popen, grace: float = 5.0) -> None:
    """Stop the process group that ``process`` leads (started with ``start_new_session``): SIGTERM to the
    group, up to ``grace`` seconds for the leader to end, then SIGKILL to whatever of the group is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            return  # nothing left in the group
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass


class DistributedTimeout(RuntimeError):
    """The processes did not finish in time; they were stopped."""


def run_torchrun(script, *args, nproc: int, timeout: float = 120, threads: int = 1,
                 env: dict[str, str] | None = None, isolate: bool = True) -> DistributedRun:
    """Run ``script`` in ``nproc`` processes with ``torchrun`` and return each rank's output.

    Everything listens on loopback: inside a loopback-only network namespace when ``isolate`` and one can
    be made here (torchrun's rendezvous store otherwise listens on every interface while it runs); gloo and
    NCCL are told to use the loopback interface in any case. The processes run in a session of their own;
    if they are not done within ``timeout`` seconds the whole session is stopped and
    :class:`DistributedTimeout` is raised.
    """
    require_positive("timeout", timeout)
    log_dir = state_dir("distributed") / "logs" / f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
    log_dir.mkdir(parents=True)
    command = torchrun_command(script, *args, nproc=nproc, log_dir=log_dir)
    prefix, why_not = loopback_namespace() if isolate else (None, "isolation was switched off")
    where = ("in a loopback-only network namespace" if prefix else
             f"on this machine's network ({why_not}): torchrun's rendezvous store listens on every interface "
             "while it runs")
    environment = {**os.environ, **worker_env(threads), **(env or {})}
    started = time.perf_counter()
    process = subprocess.Popen([*(prefix or ()), *command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env=environment, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop_group(process)
        try:
            process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        raise DistributedTimeout(f"the {nproc} processes of {Path(script).name} did not finish within "
                                 f"{timeout:g} s and were stopped; their logs are in {log_dir}") from None
    finally:
        _stop_group(process, grace=1.0)  # anything the launcher left behind in its session
    seconds = time.perf_counter() - started
    stdout, stderr = _read_rank_logs(log_dir)
    return DistributedRun(process.returncode, stdout, stderr, output or "", seconds, where, tuple(command))
