"""Chapter 11, running on a SLURM cluster: what its exercises expect, and how a wrong answer is told apart."""

from __future__ import annotations

import re

import numpy as np

from gpukit.topics.slurm import (
    array_indices,
    gpus_requested,
    memory_mb,
    read_job_script,
    sbatch_test_only,
    time_minutes,
)

from .checking import Exercise, register, script_text

SLURM_SWEEP = {"learning_rates": 5, "seeds": 4, "at_once": 6}  # the grid and queue limit of ex-slurm-array
SWEEP_SCRIPT = "sweep20.py"  # the task script of ex-slurm-array: it takes the grid index as its argument
# The request of ex-slurm-job-script: GPUs, cores for the one task, memory of the node, time in minutes.
JOB_REQUEST = {"gpus": 2, "cpus": 8, "mem_mb": 32 * 1024, "minutes": 45, "command": "python train.py"}

# What each exercise's solution submits; the checks also ask the cluster (where one answers) about these, to tell a
# request that this cluster cannot hold at all from a script that is wrong.
JOB_SCRIPT_SOLUTION = """\
#!/bin/bash
#SBATCH --job-name=train
#SBATCH --gpus=2
#SBATCH --cpus-per-task=8
#SBATCH --mem=32G
#SBATCH --time=00:45:00

set -euo pipefail
python train.py
"""
ARRAY_SCRIPT_SOLUTION = """\
#!/bin/bash
#SBATCH --job-name=sweep20
#SBATCH --array=0-19%6

set -euo pipefail
python sweep20.py "$SLURM_ARRAY_TASK_ID"
"""


def _what_sbatch_misreads(script) -> str | None:
    """The first way in which sbatch would read the script otherwise than its author meant, or None."""
    if script.interpreter is None:
        if script.lines and (script.lines[0].strip().startswith("#!") or not script.lines[0].strip()):
            return ("the text starts with a blank line or with spaces: sbatch wants #! and an interpreter as its "
                    'very first characters. Write """#!/bin/bash on the first line, or wrap an indented script in '
                    'textwrap.dedent("""\\ ... """).')
        return ("sbatch refuses a script whose first line is not #! and an interpreter: start it with "
                "#!/bin/bash.")
    if script.errors:
        return f"sbatch cannot read an option: {script.errors[0]}."
    if script.ignored:
        late = script.ignored[0]
        command = script.lines[script.first_command - 1].strip()
        return (f"the #SBATCH line {late.line} (--{late.name}) comes after the first command (line "
                f"{script.first_command}: `{command}`): sbatch stops reading #SBATCH lines at the first command, "
                "so it ignores that one. Put every #SBATCH line above the first command.")
    if script.look_alikes:
        line = script.look_alikes[0]
        return (f"line {line}, `{script.lines[line - 1].strip()}`, looks like a directive but sbatch reads it as "
                "a comment: only a line that begins with exactly #SBATCH (first column, upper case, no space) "
                "holds options.")
    variables = script.with_variables()
    if variables:
        first = variables[0]
        why = (f"line {first.line} holds a shell variable (--{first.name}={first.value}): sbatch reads #SBATCH "
               f"lines itself, before any shell runs, so it would take {first.value!r} literally.")
        if first.name in ("partition", "account"):
            why += (" The site file exports SBATCH_PARTITION and SBATCH_ACCOUNT when you source it, and sbatch reads "
                    "those: leave the line out.")
        return why
    return None


def _sbatch_refuses(text: str, reference: str) -> str | None:
    """Where a Slurm cluster answers here: what sbatch --test-only says against ``text``, if it refuses it while it
    accepts the exercise's own solution ``reference`` (if it refuses both, this cluster cannot hold the request at
    all, and the parser's verdict stands). None where no cluster answers or sbatch accepts."""
    accepted, said = sbatch_test_only(text)
    if accepted is None or accepted:
        return None
    if not sbatch_test_only(reference)[0]:
        return None
    return f"sbatch --test-only on this cluster refuses the script: {said}"


# ------------------------------------------------------------------------------------------ the job script
def _read(answer):
    """(text, script, what is wrong): the answer as a job script, and why it is not one that sbatch reads as
    its writer meant (not a script, or a directive sbatch misreads), or None."""
    text, _, wrong = script_text(answer, "the job script as text (a str, e.g. a triple-quoted string)")
    if wrong:
        return None, None, wrong
    script = read_job_script(text)
    return text, script, _what_sbatch_misreads(script)


def _numbers_of(script) -> dict:
    """GPUs, tasks, cores, memory (MB) and minutes that the script's directives ask for (None where absent)."""
    options = script.options()
    gpus = gpus_requested(options)
    tasks = int(options.get("ntasks", "1") or 1)
    if "cpus-per-task" in options:
        cores = int(options["cpus-per-task"]) * tasks
    elif "cpus-per-gpu" in options:
        cores = int(options["cpus-per-gpu"]) * gpus
    else:
        cores = None
    if "mem" in options:
        mem = memory_mb(options["mem"])
    elif "mem-per-cpu" in options and cores:
        mem = memory_mb(options["mem-per-cpu"]) * cores
    elif "mem-per-gpu" in options and gpus:
        mem = memory_mb(options["mem-per-gpu"]) * gpus
    else:
        mem = None
    minutes = time_minutes(options["time"]) if "time" in options else None
    return {"gpus": gpus, "tasks": tasks, "cores": cores, "mem_mb": mem, "minutes": minutes,
            "nodes": options.get("nodes", "1")}


def _a_script_for_the_request(answer) -> str | None:
    """What is wrong with a job script for JOB_REQUEST, read as sbatch reads it (and, where a Slurm cluster
    answers, as it judges it with sbatch --test-only)."""
    text, script, wrong = _read(answer)
    if wrong:
        return wrong
    options = script.options()
    for name in ("partition", "account"):
        if name in options:
            return (f"the script names the {name} (--{name}={options[name]}): leave it to the site file, which "
                    f"exports SBATCH_{name.upper()} when you source it, so that the script runs unchanged on every "
                    "cluster.")
    try:
        asked = _numbers_of(script)
    except ValueError as error:
        return f"sbatch would refuse a value: {error}."
    if asked["nodes"] != "1":
        return f"the script asks for --nodes={asked['nodes']}: the request fits on one node."
    if asked["gpus"] == 0:
        return "the script asks for no GPU: add an #SBATCH --gpus= line (or --gres=gpu:N)."
    if asked["gpus"] != JOB_REQUEST["gpus"]:
        return f"the script asks for {asked['gpus']} GPU(s), not the number the request gives."
    if asked["tasks"] != 1:
        return (f"--ntasks={asked['tasks']} asks for {asked['tasks']} tasks (processes that srun starts), each with "
                "its own cores; the program is one process that uses several cores: --cpus-per-task.")
    if asked["cores"] is None:
        return "the script asks for no cores: add #SBATCH --cpus-per-task= (without it, the task gets one core)."
    if asked["cores"] != JOB_REQUEST["cpus"]:
        return f"the script asks for {asked['cores']} core(s) for its task, not the number the request gives."
    if asked["mem_mb"] is None:
        return "the script asks for no memory: add #SBATCH --mem= (without it, the partition's default applies)."
    if asked["mem_mb"] != JOB_REQUEST["mem_mb"]:
        unitless = re.fullmatch(r"\s*\d+\s*", options.get("mem", "x"))
        return (f"the script asks for {asked['mem_mb']:g} MB of memory, not the amount the request gives"
                + (": a --mem value without a unit is in megabytes; write G for gigabytes." if unitless else "."))
    if asked["minutes"] is None:
        return "the script sets no time limit: add #SBATCH --time= (the partition's default may be far longer)."
    if asked["minutes"] != JOB_REQUEST["minutes"]:
        short = re.fullmatch(r"\s*\d+:\d+\s*", options["time"])
        return (f"--time={options['time']} is {asked['minutes']:g} minutes, not the limit the request gives"
                + (": with one colon sbatch reads minutes:seconds; write hours:minutes:seconds." if short else "."))
    if not any(JOB_REQUEST["command"] in line for line in script.commands()):
        return f"the script never runs `{JOB_REQUEST['command']}`: put it after the #SBATCH lines."
    return _sbatch_refuses(text, JOB_SCRIPT_SOLUTION)


def _requested_numbers(answer):
    _, script, _ = _read(answer)
    asked = _numbers_of(script)
    return np.array([asked["gpus"], asked["cores"], round(asked["mem_mb"]), round(asked["minutes"])], dtype=np.int64)


# ------------------------------------------------------------------------------------------ the job array
def _array_problem(spec: str) -> str | None:
    """What is wrong with an --array value for SLURM_SWEEP's grid, counted from 0 as sweep_task.py counts."""
    try:
        indices, limit = array_indices(spec)
    except ValueError as error:
        return f"sbatch would refuse --array={spec}: {error}."
    points = SLURM_SWEEP["learning_rates"] * SLURM_SWEEP["seeds"]
    if indices and indices[0] != 0:
        return (f"the first task id is {indices[0]}: the task script uses SLURM_ARRAY_TASK_ID as an index into the "
                "grid, which starts at 0.")
    if indices != list(range(len(indices))):
        return "the task ids have gaps: every point of the grid needs its own task."
    if len(indices) != points:
        return f"--array={spec} makes {len(indices)} tasks, but the grid has {points} points."
    if limit is None:
        return "every task may run at once: add a limit after a % sign."
    if limit != SLURM_SWEEP["at_once"]:
        return f"--array={spec} lets {limit} tasks run at once, not the number the exercise allows."
    return None


def _an_array_script_for_the_sweep(answer) -> str | None:
    """What is wrong with a job-array script for the sweep of SLURM_SWEEP, run by SWEEP_SCRIPT."""
    if isinstance(answer, str) and "\n" not in answer and re.fullmatch(r"[\d\-,:%\s]+", answer):
        return (f"{answer!r} is an --array value; write the whole job script, with that value in an "
                "#SBATCH --array= line.")
    text, script, wrong = _read(answer)
    if wrong:
        return wrong
    options = script.options()
    if "array" not in options:
        return "the script has no #SBATCH --array= line: it would run once, not once per point of the grid."
    bad_array = _array_problem(options["array"])
    if bad_array:
        return bad_array
    runs = [line for line in script.commands() if SWEEP_SCRIPT in line]
    if not runs:
        return f"the script never runs python {SWEEP_SCRIPT}: put that command after the #SBATCH lines."
    if not any(re.search(r"\$\{?SLURM_ARRAY_TASK_ID\b", line) for line in runs):
        if any("%a" in line for line in runs):
            return ("%a is a pattern for --output and --error file names only; in the script's commands the task's "
                    "index is $SLURM_ARRAY_TASK_ID.")
        if any(re.search(r"\$\{?SLURM_(ARRAY_)?JOB_ID\b", line) for line in runs):
            return ("that passes a job id, not the task's index in the array: every task would get a number that "
                    "is not a point of the grid. The index is $SLURM_ARRAY_TASK_ID.")
        return f"pass each task its index: python {SWEEP_SCRIPT} \"$SLURM_ARRAY_TASK_ID\"."
    return _sbatch_refuses(text, ARRAY_SCRIPT_SOLUTION)


def _array_task_ids(answer):
    _, script, _ = _read(answer)
    return np.array(array_indices(script.options()["array"])[0])


register(
    Exercise("ex-slurm-cpus-per-task", lambda: 4 * (1 + 5), rtol=0.0, writes="a number"),
    Exercise("ex-slurm-job-script",
             lambda: np.array([JOB_REQUEST["gpus"], JOB_REQUEST["cpus"], JOB_REQUEST["mem_mb"],
                               JOB_REQUEST["minutes"]], dtype=np.int64),
             rtol=0.0, method=_a_script_for_the_request, result=_requested_numbers, writes="a script"),
    Exercise("ex-slurm-array", lambda: np.arange(SLURM_SWEEP["learning_rates"] * SLURM_SWEEP["seeds"]),
             method=_an_array_script_for_the_sweep, result=_array_task_ids, writes="a script"),
)
