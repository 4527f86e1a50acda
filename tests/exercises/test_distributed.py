"""Chapter 10's checks when a process crashes rather than raises, and when two checks of one script run at once.

A rank of a correct DDP script can crash while its interpreter shuts down (PyTorch issue #190489: its autograd
and gloo threads race the interpreter's teardown), after the script has done and printed its work: torchrun then
reports a signal, no rank shows a Python error, and the check said only "the script failed under torchrun
(======)", torchrun's last line. The checks now name the first rank to fail, its exit code or signal and its last
line (torchrun's "Root Cause"), and run once more when that rank crashed: a crash that comes again is reported.
"""

from __future__ import annotations

import json
import textwrap
import threading

import pytest

from gpukit.exercises import distributed as checks
from gpukit.exercises.checking import check
from gpukit.topics.distributed import DistributedRun
from tests.exercises.cases.distributed import DDP_SCRIPT, train_one_written

# What torchrun 2.13 printed last when rank 1 of two died of SIGSEGV after joining the group, each rank's entry
# written as FAILED_RANK.
FAILED_RANK = """\
[{entry}]:
  time      : 2026-11-29_03:16:08
  host      : localhost
  rank      : {rank} (local_rank: {rank})
  exitcode  : -{signal} (pid: {pid})  ({name})
  error_file: <N/A>
  traceback : Signal {signal} ({name}) received by PID {pid}
"""
SEGFAULT_SUMMARY = f"""\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
=======================================================
check_ddp.py FAILED
-------------------------------------------------------
Failures:
{FAILED_RANK.format(entry=1, rank=0, signal=15, pid=25591, name="SIGTERM")}\
-------------------------------------------------------
Root Cause (first observed failure):
{FAILED_RANK.format(entry=0, rank=1, signal=11, pid=25592, name="SIGSEGV")}\
=======================================================
"""
RESET = "[rank0]: RuntimeError: [pair.cc:537] Read error [127.0.0.1]:21728: Connection reset by peer.\n"


def crashed_run() -> DistributedRun:
    return DistributedRun(1, {0: "", 1: ""}, {0: RESET, 1: "joined\n"}, SEGFAULT_SUMMARY, 3.0, "here")


def test_the_first_rank_to_fail_is_named_with_its_signal_not_the_error_it_caused_on_another_rank():
    run = crashed_run()
    assert run.root_cause() == "rank 1: exit code -11, Signal 11 (SIGSEGV) received by PID 25592"
    assert "first to fail, rank 1: exit code -11, Signal 11 (SIGSEGV)" in run.failure()
    assert checks._crashed(run)
    assert checks._first_error(run) == ("rank 1: exit code -11, Signal 11 (SIGSEGV) received by PID 25592; "
                                        "its last line: joined")


def test_a_rank_that_raised_is_reported_by_its_error_and_is_no_crash():
    summary = SEGFAULT_SUMMARY.replace("exitcode  : -11 (pid: 25592)  (SIGSEGV)", "exitcode  : 1 (pid: 25592)")
    summary = summary.replace("Signal 11 (SIGSEGV) received by PID 25592", "To enable traceback see: ...")
    run = DistributedRun(1, {0: "", 1: ""}, {0: "", 1: "[rank1]: NameError: name 'loader' is not defined\n"},
                         summary, 3.0, "here")
    assert run.root_cause() == "rank 1: exit code 1"
    assert not checks._crashed(run)
    assert checks._first_error(run) == "rank 1: NameError: name 'loader' is not defined"
    assert DistributedRun(1, {}, {}, "torchrun: failed to start", 1.0, "here").root_cause() is None


def _runs(monkeypatch, *runs):
    """Make the check's torchrun return ``runs`` in turn; returns the list of scripts it was asked to run."""
    asked, queue = [], list(runs)
    monkeypatch.setattr(checks, "run_torchrun", lambda script, *args, **options: asked.append(script) or queue.pop(0))
    monkeypatch.setattr(checks, "_DDP_RUNS", {})
    return asked


def test_a_crash_runs_the_script_once_more_and_a_second_crash_is_reported(monkeypatch):
    done = DistributedRun(0, {0: json.dumps({"checksum": checks._ddp_expected()}) + "\n", 1: ""}, {0: "", 1: ""},
                          "", 3.0, "here")
    asked = _runs(monkeypatch, crashed_run(), done)
    assert checks._ddp_script_runs_as_ddp(DDP_SCRIPT) is None and len(asked) == 2

    asked = _runs(monkeypatch, crashed_run(), crashed_run())
    message = checks._ddp_script_runs_as_ddp(DDP_SCRIPT)
    assert len(asked) == 2
    assert message.startswith("the script failed under torchrun (rank 1: exit code -11, Signal 11 (SIGSEGV)")


def test_a_crash_after_rank_0_printed_its_checksum_is_one_in_shutting_down_and_the_run_counts(monkeypatch):
    # PyTorch's gloo can end a rank with "terminate called without an active exception" as it exits, after the
    # script's work (twice in a row once, on a loaded machine): rank 0's checksum came after DDP's last
    # all-reduce, so the result is whole and the script is not run again.
    finished = crashed_run()
    finished.stdout[0] = json.dumps({"checksum": checks._ddp_expected()}) + "\n"
    asked = _runs(monkeypatch, finished)
    assert checks._ddp_script_runs_as_ddp(DDP_SCRIPT) is None and len(asked) == 1
    # Not so where the crash came before the checksum (above), or where a rank raised: that is the script's error.
    raised = DistributedRun(1, dict(finished.stdout), {0: "", 1: "ValueError: mine\n"}, SEGFAULT_SUMMARY, 3.0, "here")
    asked = _runs(monkeypatch, raised)
    message = checks._ddp_script_runs_as_ddp(DDP_SCRIPT)
    assert len(asked) == 1 and message.startswith("the script failed under torchrun (rank 1: ValueError: mine)")


def test_an_all_reduce_run_whose_rank_crashed_after_every_rank_reported_counts(monkeypatch):
    line = json.dumps({"t": [1.0], "own": [1.0], "reference": [1.0], "returned a new tensor": False}) + "\n"
    ranks = range(checks.plan_processes(checks.HAND_WORLD_SIZE).world_size)

    def crashed_after(reported):  # rank 1 ended by SIGSEGV, as in crashed_run
        return DistributedRun(1, {rank: line if rank in reported else "" for rank in ranks},
                              {rank: "joined\n" if rank == 1 else "" for rank in ranks}, SEGFAULT_SUMMARY, 3.0, "here")

    asked = _runs(monkeypatch, crashed_after(ranks))
    monkeypatch.setattr(checks, "_HAND_RUNS", {})
    records, wrong = checks._hand_records("def f(t):\n    pass\n", "f")
    assert wrong is None and len(records) == len(ranks) and len(asked) == 1
    half = crashed_after([0])
    asked = _runs(monkeypatch, half, half)
    records, wrong = checks._hand_records("def g(t):\n    pass\n", "g")
    assert records is None and len(asked) == 2 and "exit code -11" in wrong


@pytest.mark.slow
def test_a_correct_script_whose_rank_crashes_once_at_exit_passes_under_real_torchrun(tmp_path):
    train_one_written()
    once = tmp_path / "crashed-once"
    # The solution, then rank 1 ends by SIGSEGV the first time it runs, after rank 0 printed its checksum.
    script = DDP_SCRIPT + textwrap.dedent(f"""\
        import os, pathlib, signal
        mark = pathlib.Path({str(once)!r})
        if os.environ["RANK"] == "1" and not mark.exists():
            mark.touch()
            os.kill(os.getpid(), signal.SIGSEGV)
        """)
    result = check("ex-dist-ddp-script", script)
    assert result.correct, result.message
    assert once.exists()


def test_two_checks_of_the_same_script_at_once_each_run_their_own_file(monkeypatch):
    """A lesson's kernel and the tests (or two test processes) can check the same script at the same time. Each
    check deletes its script when its run ends; with one name for one text, the first to end deleted the other's
    before torchrun opened it ("can't open file .../check_ddp_<digest>.py", a failure of the solution's test)."""
    both_written, first_done = threading.Barrier(2, timeout=30), threading.Event()
    found = {}
    done = DistributedRun(0, {0: json.dumps({"checksum": checks._ddp_expected()}) + "\n", 1: ""}, {0: "", 1: ""},
                          "", 3.0, "here")

    def run_torchrun(script, *args, **options):
        which = threading.current_thread().name
        both_written.wait()
        if which == "second":
            first_done.wait(timeout=30)  # the first check has ended and deleted its script
        found[which] = script.read_text(encoding="utf-8") if script.exists() else None
        return done

    def check_as(which):
        found[f"{which} says"] = checks._ddp_script_runs_as_ddp(DDP_SCRIPT)
        if which == "first":
            first_done.set()

    monkeypatch.setattr(checks, "run_torchrun", run_torchrun)
    monkeypatch.setattr(checks, "_DDP_RUNS", {})
    threads = [threading.Thread(target=check_as, args=(which,), name=which) for which in ("first", "second")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert found == {"first": DDP_SCRIPT, "second": DDP_SCRIPT, "first says": None, "second says": None}
