"""Reading how a check's child ended (:func:`interpret`): its report, or its error, a crash or its time limit, as
the preflight's lines, each failure with its fix."""

from __future__ import annotations

import signal
from collections.abc import Mapping

from gpukit.base.child_python import ScriptRun
from gpukit.base.errors import first_line
from gpukit.commands.preflight.fixes import pick_fix
from gpukit.commands.preflight.results import FAIL, OK, Result
from gpukit.commands.preflight.runner import MARKER, ChildCheck, ChildRun, payloads


def short(text: str, limit: int = 240) -> str:
    """``text`` on one line, its runs of white space made one space, cut to ``limit`` characters."""
    return first_line(" ".join(text.split()), limit)


def last_line(text: str) -> str:
    """The last line a child wrote other than its report, where it was when it stopped, as a failure's detail ends
    with it (``" (its last line: '...')"``); ``""`` where it wrote none."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith(MARKER)]
    return f" (its last line: {short(lines[-1], 160)!r})" if lines else ""


def interpret(check: ChildCheck, run: ChildRun, words: Mapping[str, str], limit: float) -> list[Result]:
    """The lines for how a check's child ended."""
    output = f"{run.stdout}\n{run.stderr}"
    if run.timed_out:
        return [Result(check.name, FAIL, f"did not finish within {limit:.0f} s and was stopped{last_line(output)}",
                       "rerun the preflight (a first run compiles kernels); if this check hangs again, run its "
                       f"lesson on this node to see where. {pick_fix(check, output, words)}")]
    reports = payloads(run)
    if run.ok and reports:
        if check.lines is not None:
            return check.lines(reports[-1], words)
        return [Result(check.name, OK, str(reports[-1].get("detail", "ran")))]
    if run.ok:
        return [Result(check.name, FAIL, f"the child Python ended without reporting a result{last_line(output)}",
                       pick_fix(check, output, words))]
    if run.returncode < 0:
        try:
            how = f"crashed: killed by {signal.Signals(-run.returncode).name}"
        except ValueError:
            how = f"crashed: killed by signal {-run.returncode}"
        last = [line for line in run.stderr.splitlines() if line.strip()][-1:]
        detail = f"{how}{' after ' + repr(short(last[0], 120)) if last else ''}"
    else:
        detail = short(error_text(run))
    return [Result(check.name, FAIL, detail, pick_fix(check, output, words))]


def error_text(run: ScriptRun) -> str:
    """The line that names the exception; where it ends with a colon (``... `ptxas` stderr:``), the cause is on the
    next line, which is added."""
    error = run.error
    if not error.endswith(":"):
        return error
    lines = [line.strip() for line in run.stderr.splitlines() if line.strip()]
    try:
        after = lines[len(lines) - 1 - lines[::-1].index(error.strip()) + 1]
    except (ValueError, IndexError):
        return error
    return f"{error} {after}"
