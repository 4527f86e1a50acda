"""Reading the book's Slurm job templates, and asking a Slurm cluster about itself when there is one.

- :func:`templates_dir` is the ``slurm_templates/`` folder; :func:`template_header` is a template's opening
  comment (what it is for and how to submit it) and :func:`sbatch_options` its ``#SBATCH`` requests as a dict;
- :func:`array_indices` expands a job-array specification (``0-11%4``) into its task ids and throttle;
- :func:`slurm_command` runs ``sinfo``/``squeue``/... if Slurm is installed and answers, and otherwise
  returns ``None`` with the reason, so that a lesson can skip, saying why;
- :func:`read_job_script` reads a job script's ``#SBATCH`` directives as sbatch does (and what sbatch ignores),
  with :func:`time_minutes`, :func:`memory_mb` and :func:`gpus_requested` for the values, and
  :func:`sbatch_test_only` asks a Slurm cluster, where one answers, whether it would accept a script.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gpukit.base.paths import project_root

_ARRAY_ITEM = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$")


def templates_dir() -> Path:
    return project_root() / "slurm_templates"


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


# ------------------------------------------------------------------------------------------ job scripts
# How sbatch reads a job script (Slurm's src/sbatch/opt.c, _opt_batch_script): line by line from the top, a line
# that starts with exactly "#SBATCH" (first column, upper case) holds options; any other line that is blank or
# whose first non-blank character is "#" is a comment; the first other line is a command, and sbatch stops
# reading there. Options are split like a command line (quotes group, an unquoted "#" starts a comment); no shell
# runs, so "$NAME" is never expanded.
_SHORT_OPTIONS = {"A": "account", "a": "array", "c": "cpus-per-task", "C": "constraint", "D": "chdir",
                  "e": "error", "G": "gpus", "J": "job-name", "N": "nodes", "n": "ntasks", "o": "output",
                  "p": "partition", "q": "qos", "t": "time", "w": "nodelist"}
_FLAGS = {"exclusive", "requeue", "no-requeue", "hold", "parsable", "test-only", "wait", "contiguous",
          "overcommit", "oversubscribe", "spread-job", "use-min-nodes", "quiet", "verbose", "ignore-pbs", "reboot",
          "no-kill", "exact"}
_LOOKS_LIKE_A_DIRECTIVE = re.compile(r"^\s*#\s*sbatch\b", re.I)
_MEMORY_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


@dataclass(frozen=True)
class Directive:
    """One option sbatch takes from a ``#SBATCH`` line: its long name (``-c 8`` is ``cpus-per-task``), its value
    (``""`` for a flag) and the line it is on (counted from 1)."""

    name: str
    value: str
    line: int


@dataclass(frozen=True)
class JobScript:
    """A job script as sbatch reads it: see :func:`read_job_script`."""

    lines: tuple[str, ...]
    directives: tuple[Directive, ...]  # what sbatch reads, in order
    ignored: tuple[Directive, ...]  # #SBATCH lines after the first command: sbatch never sees them
    first_command: int | None  # the line of the first command (counted from 1), None if there is none
    look_alikes: tuple[int, ...]  # lines that look like directives but are comments ("# SBATCH", "#sbatch", indented)
    errors: tuple[str, ...] = ()  # options that sbatch could not read (an unmatched quote, a missing value)

    @property
    def interpreter(self) -> str | None:
        """The ``#!`` line's interpreter (sbatch refuses a script without one), or None."""
        first = self.lines[0] if self.lines else ""
        return first[2:].strip() or None if first.startswith("#!") else None

    def options(self) -> dict[str, str]:
        """The options sbatch reads, by long name; a later line wins over an earlier one, as in sbatch."""
        return {d.name: d.value for d in self.directives}

    def with_variables(self) -> list[Directive]:
        """The directives that hold a shell variable (``$NAME`` or ``${NAME}``), which sbatch takes literally."""
        return [d for d in self.directives if "$" in d.value]

    def commands(self) -> list[str]:
        """The script's command lines from the first command on, without comments and blank lines."""
        if self.first_command is None:
            return []
        return [line.strip() for line in self.lines[self.first_command - 1:]
                if line.strip() and not line.lstrip().startswith("#")]


def _split_arguments(text: str) -> list[str]:
    """What sbatch's _get_argument makes of the rest of a #SBATCH line: words, quotes grouping, backslash escaping,
    an unquoted # ending the line. Raises ValueError for an unmatched quote."""
    words, word, quote, escaped, started = [], [], "", False, False
    for char in text:
        if escaped:
            word.append(char)
            escaped = False
        elif char == "\\":
            escaped = started = True
        elif quote:
            if char == quote:
                quote = ""
            else:
                word.append(char)
        elif char in "\"'":
            quote, started = char, True
        elif char == "#":
            break
        elif char.isspace():
            if started:
                words.append("".join(word))
                word, started = [], False
        else:
            word.append(char)
            started = True
    if quote:
        raise ValueError(f"unmatched {quote} in {text.strip()!r}")
    if started:
        words.append("".join(word))
    return words


def _options_from(words: list[str], line: int) -> tuple[list[Directive], list[str]]:
    """Turn a #SBATCH line's words into directives, as getopt does: ``--name=value``, ``--name value``,
    ``-c 8``, ``-c8``, and flags."""
    found, errors, i = [], [], 0
    while i < len(words):
        word = words[i]
        i += 1
        if word.startswith("--"):
            name, equals, value = word[2:].partition("=")
            if not equals and name not in _FLAGS and i < len(words) and not words[i].startswith("-"):
                value, i = words[i], i + 1
            found.append(Directive(name, value, line))
        elif word.startswith("-") and len(word) > 1:
            letter = word[1]
            name = _SHORT_OPTIONS.get(letter, letter)
            value = word[2:].lstrip("=")
            if not value:
                if i < len(words):
                    value, i = words[i], i + 1
                else:
                    errors.append(f"line {line}: -{letter} needs a value")
            found.append(Directive(name, value, line))
        else:
            errors.append(f"line {line}: {word!r} is not an option (options start with - or --)")
    return found, errors


def read_job_script(text: str) -> JobScript:
    """Read a job script's ``#SBATCH`` directives as sbatch does, without Slurm.

    sbatch reads ``#SBATCH`` lines from the top and stops at the first command; blank lines and comments may come
    between them. A ``#SBATCH`` line after the first command is ignored (it lands in :attr:`JobScript.ignored`),
    and so is a line that only looks like one (``# SBATCH``, ``#sbatch``, an indented ``#SBATCH``:
    :attr:`JobScript.look_alikes`)."""
    if not isinstance(text, str):
        raise TypeError(f"a job script is text (a str), not {type(text).__name__}")
    lines = tuple(text.splitlines())
    directives, ignored, look_alikes, errors = [], [], [], []
    first_command = None
    for number, line in enumerate(lines, start=1):
        if line.startswith("#SBATCH"):
            try:
                found, bad = _options_from(_split_arguments(line[len("#SBATCH"):]), number)
            except ValueError as error:
                found, bad = [], [f"line {number}: {error}"]
            if first_command is None:
                directives.extend(found)
                errors.extend(bad)
            else:
                ignored.extend(found)
            continue
        stripped = line.strip()
        if _LOOKS_LIKE_A_DIRECTIVE.match(line):
            look_alikes.append(number)
        if first_command is None and stripped and not stripped.startswith("#"):
            first_command = number
    return JobScript(lines, tuple(directives), tuple(ignored), first_command, tuple(look_alikes), tuple(errors))


def time_minutes(value: str) -> float:
    """An sbatch ``--time`` value in minutes: ``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S``.

    Beware ``00:45``: minutes and seconds, so 0.75 minutes, not 45."""
    text = value.strip()
    days, dash, rest = text.partition("-")
    if not dash:
        days, rest = "0", text
    parts = rest.split(":")
    if not days.isdigit() or not all(p.isdigit() for p in parts) or not 1 <= len(parts) <= 3:
        raise ValueError(f"{value!r} is not a time sbatch reads (minutes, M:S, H:M:S, D-H, D-H:M or D-H:M:S)")
    numbers = [int(p) for p in parts]
    if dash:  # D-H, D-H:M, D-H:M:S
        hours, minutes, seconds = (numbers + [0, 0])[:3]
    elif len(numbers) == 3:
        hours, minutes, seconds = numbers
    else:  # M or M:S
        hours, (minutes, seconds) = 0, (numbers + [0])[:2]
    return int(days) * 1440 + hours * 60 + minutes + seconds / 60


def memory_mb(value: str) -> float:
    """An sbatch ``--mem`` value in megabytes: a whole number with an optional K, M, G or T (``GB`` is read as ``G``);
    no unit means megabytes."""
    match = re.fullmatch(r"(\d+)(?:([KMGT])B?)?", value.strip(), re.I)
    if not match:
        raise ValueError(f"{value!r} is not a memory size sbatch reads (a whole number, then K, M, G or T)")
    return float(match[1]) * _MEMORY_UNITS[(match[2] or "M").upper()]


def _gpu_count(value: str, *, gres: bool = False) -> int:
    """The count at the end of ``[type:]N`` (``--gpus``) or ``gpu[:type][:N]`` (``--gres``, where no count is 1)."""
    last = value.split(":")[-1]
    if last.isdigit():
        return int(last)
    if gres:
        return 1
    raise ValueError(f"{value!r} does not end in a number of GPUs")


def gpus_requested(options: dict[str, str]) -> int:
    """How many GPUs a job with these options gets in all: ``--gpus``, ``--gres=gpu:N`` (per node),
    ``--gpus-per-node`` or ``--gpus-per-task``; 0 when none is asked for."""
    nodes = int(options.get("nodes", "1").split("-")[0] or 1)
    tasks = int(options.get("ntasks", "0") or 0) or nodes * int(options.get("ntasks-per-node", "1") or 1)
    if "gpus" in options:
        return _gpu_count(options["gpus"])
    if "gpus-per-node" in options:
        return nodes * _gpu_count(options["gpus-per-node"])
    if "gpus-per-task" in options:
        return tasks * _gpu_count(options["gpus-per-task"])
    for item in options.get("gres", "").split(","):
        if item == "gpu" or item.startswith("gpu:"):
            return nodes * _gpu_count(item, gres=True)
    return 0


def sbatch_test_only(text: str, *, timeout: float = 30) -> tuple[bool | None, str]:
    """Ask this machine's Slurm whether it would accept the job script ``text``, without submitting it.

    Runs ``sbatch --test-only`` on it in the book's folder after sourcing ``slurm_templates/site.sh``, as a reader
    submits (the site file exports the partition and account). Returns ``(True, what sbatch said)`` if accepted,
    ``(False, sbatch's error)`` if refused, and ``(None, why not)`` where no Slurm cluster answers here."""
    partitions, why = slurm_command("sinfo", "-h", "-o", "%P", timeout=timeout)
    if partitions is None:
        return None, why
    with tempfile.TemporaryDirectory(prefix="gpukit-sbatch-") as folder:
        script = Path(folder) / "job.sbatch"
        script.write_text(text, encoding="utf-8")
        command = 'source slurm_templates/site.sh && exec sbatch --test-only "$1"'
        try:
            done = subprocess.run(["bash", "-c", command, "sbatch-test", str(script)], cwd=project_root(),
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, f"sbatch --test-only did not answer within {timeout:g} s"
    said = done.stderr.replace(str(script), "job.sbatch").strip()
    last = (said.splitlines() or [f"exit status {done.returncode}"])[-1]
    return done.returncode == 0, last
