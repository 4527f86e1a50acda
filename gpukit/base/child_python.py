"""Running a Python script in a child process and reading how it ended.

Some lessons must run code in a process of its own: under a memory cap that would also cap the notebook,
with an environment variable that must be set before CUDA starts, or with an error that would leave the
notebook's CUDA context unusable. :func:`run_python` runs the same Python as the notebook and returns a
:class:`ScriptRun` with the exit status, the output, and the line that names its error.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass

from gpukit.base.arguments import require_positive

# "RuntimeError: ...", "torch.AcceleratorError: ...", "KeyboardInterrupt" at the start of a line.
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b(:|$)")


@dataclass(frozen=True)
class ScriptRun:
    """How a child Python ended: ``returncode`` (0 for success), and what it wrote to ``stdout`` and ``stderr``."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def error(self) -> str:
        """The line that names the exception (``RuntimeError: ...``), or ``""`` when the child succeeded.

        It is the last unindented ``SomethingError: ...`` line of the output, not simply the last line: CUDA
        errors end with lines of advice after the one that names them."""
        if self.ok:
            return ""
        lines = [line.rstrip() for line in self.stderr.splitlines() if line.strip()]
        named = [line for line in lines if _EXCEPTION_LINE.match(line)]
        if named:
            return named[-1]
        return lines[-1].strip() if lines else f"exit status {self.returncode}, nothing on stderr"


def run_python(*args, env: dict[str, str] | None = None, timeout: float = 300) -> ScriptRun:
    """Run ``python *args`` with this interpreter, the environment updated by ``env``; wait at most ``timeout``
    seconds. Output is captured, not printed."""
    if not args:
        raise ValueError("run_python needs a script path (or '-c', code) to run")
    require_positive("timeout", timeout)
    if env is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise TypeError("env must map variable names to string values")
    environment = {**os.environ, **(env or {})}
    done = subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, env=environment,
                          timeout=timeout, check=False)
    return ScriptRun(done.returncode, done.stdout, done.stderr)


def pip_command() -> str:
    """How to run pip for the Python running this code: ``%pip`` in a notebook's kernel (IPython's magic installs
    into the kernel's own environment, wherever it lives, and the advice reads the same on the book's pages, with
    no path of the machine that built them), else this interpreter's ``python -m pip``."""
    try:
        from IPython import get_ipython
    except ImportError:
        shell = None
    else:
        shell = get_ipython()
    if shell is not None and type(shell).__name__ == "ZMQInteractiveShell":
        return "%pip"
    return f"{shlex.quote(sys.executable)} -m pip"
