"""Reading the book's Slurm job templates, and asking a Slurm cluster about itself when there is one.

- :func:`templates` lists ``slurm_templates/``; :func:`template_header` is a template's opening comment (what
  it is for and how to submit it) and :func:`sbatch_options` its ``#SBATCH`` requests as a dict;
- :func:`array_indices` expands a job-array specification (``0-11%4``) into its task ids and throttle;
- :func:`slurm_command` runs ``sinfo``/``squeue``/... if Slurm is installed and answers, and otherwise
  returns ``None`` with the reason, so that a lesson can skip, saying why.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from .paths import project_root

_ARRAY_ITEM = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$")


def templates_dir() -> Path:
    return project_root() / "slurm_templates"


def templates() -> list[Path]:
    """The job scripts (``*.sbatch``) and submit scripts (``*.sh`` but the site file), sorted by name."""
    folder = templates_dir()
    return sorted(folder.glob("*.sbatch")) + sorted(p for p in folder.glob("*.sh") if p.name != "site.sh")


def _path(template) -> Path:
    path = Path(template)
    return path if path.is_absolute() or path.exists() else templates_dir() / path


def template_header(template) -> str:
    """The comment lines under the ``#!`` line, up to the first ``#SBATCH`` line or command, without ``# ``."""
    lines = []
    for line in _path(template).read_text().splitlines()[1:]:
        if not line.startswith("#") or line.startswith("#SBATCH"):
            break
        lines.append(line[2:] if line.startswith("# ") else line[1:])
    return "\n".join(lines)


def sbatch_options(template) -> dict[str, str]:
    """The ``#SBATCH --name=value`` lines of a template as ``{name: value}`` (``""`` for a bare flag)."""
    options = {}
    for line in _path(template).read_text().splitlines():
        if line.startswith("#SBATCH"):
            option = line.split(maxsplit=1)[1].split("#")[0].strip()
            name, _, value = option.lstrip("-").partition("=")
            options[name] = value
    return options


def array_indices(spec: str) -> tuple[list[int], int | None]:
    """The task ids of an ``--array`` value and its throttle: ``"0-11%4"`` -> ``([0, ..., 11], 4)``.

    Accepts what sbatch accepts: comma-separated ids and ranges, a range with a step (``0-10:2``), and an
    optional ``%N`` at the end (at most N tasks running at once). Raises ValueError on anything else."""
    if not isinstance(spec, str):
        raise TypeError(f"an array specification is a string such as '0-9%2', not {type(spec).__name__}")
    body, percent, throttle = spec.strip().partition("%")
    limit = None
    if percent:
        if not throttle.isdigit() or int(throttle) < 1:
            raise ValueError(f"after % comes the largest number of tasks to run at once, not {throttle!r}")
        limit = int(throttle)
    indices: set[int] = set()
    for item in body.split(","):
        match = _ARRAY_ITEM.match(item.strip())
        if not match:
            raise ValueError(f"{item!r} is not a task id or a range such as 0-9 or 0-9:2")
        first, last, step = int(match[1]), int(match[2] or match[1]), int(match[3] or 1)
        if last < first or step < 1:
            raise ValueError(f"the range {item!r} is empty")
        indices.update(range(first, last + 1, step))
    return sorted(indices), limit


def slurm_command(*args: str, timeout: float = 20) -> tuple[str | None, str]:
    """Run a Slurm command (``slurm_command("sinfo", "-s")``): (its output, "") if it answered, else
    (None, why not): not installed, no cluster configured or reachable, or an error."""
    if not args:
        raise ValueError("name the Slurm command to run, e.g. slurm_command('sinfo')")
    if shutil.which(args[0]) is None:
        return None, f"{args[0]} is not installed here (this machine is not a Slurm cluster's login node)"
    try:
        done = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"{args[0]} did not answer within {timeout:g} s (is slurmctld reachable?)"
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return None, f"{args[0]} failed: {first}"
    return done.stdout, ""
