# shellcheck shell=bash
# Site settings for the job templates in this folder: the ONE file to edit for your cluster. Every
# template sources it inside the job; you source it in your login shell before submitting:
#
#   cd gpu-python                                # the repository's top folder, on the cluster
#   source slurm_templates/site.sh               # exports SBATCH_PARTITION / SBATCH_ACCOUNT (see below)
#   sbatch slurm_templates/one-gpu.sbatch
#
# Why the partition and the account are not in the templates: sbatch reads the `#SBATCH` lines before the
# script runs, so they cannot contain shell variables. sbatch (and salloc, srun) read the environment
# variables SBATCH_PARTITION / SBATCH_ACCOUNT (SALLOC_*, SLURM_*) instead, and an option on the command line
# beats both: `sbatch --partition=gpu-long slurm_templates/one-gpu.sbatch`.
#
# Each value below can also be set in the environment before this file is read (a value already set wins);
# the tests use that to point the templates at a one-node test cluster.

# Partition and account; `sinfo -s` lists the partitions, `sacctmgr show assoc user=$USER` your accounts.
: "${GPU_PYTHON_PARTITION:=}"                    # e.g. gpu
: "${GPU_PYTHON_ACCOUNT:=}"                      # e.g. proj1234
# Environment modules to load before Python starts (`module avail`), e.g. "cuda/12.4 gcc/12".
: "${GPU_PYTHON_MODULES:=}"
# The Python environment: a conda environment (name or path) if set, else a virtualenv folder
# (relative to the folder you submit from, made by `make setup`).
: "${GPU_PYTHON_CONDA_ENV:=}"
: "${GPU_PYTHON_VENV:=.venv}"
# GPU type names as the cluster calls them (`sinfo -o "%P %G"` shows gpu:TYPE:COUNT), for
# bench-each-gpu-type.sh. Empty: one untyped GPU.
: "${GPU_PYTHON_GPU_TYPES:=}"
# The address other nodes reach this node at, for servers a job starts (ipyparallel controller, Dask
# scheduler, Ray head, torchrun rendezvous). Empty: the first address `hostname --ip-address` gives.
: "${GPU_PYTHON_HOST_IP:=}"
# How many times ray.sbatch starts Ray's head before it gives up: the head must register within 30 s,
# which a node busy with other jobs' start-up can miss.
: "${GPU_PYTHON_RAY_HEAD_TRIES:=3}"
# Seconds between two nvidia-smi samples in the GPU usage log (gpu_python_monitor).
: "${GPU_PYTHON_MONITOR_SECONDS:=30}"
# Where sweeps and benchmarks write their results (relative to the folder you submit from).
: "${GPU_PYTHON_RESULTS:=results}"
# What build-book.sbatch and bench.sbatch run. Empty book command: the full clean rebuild.
: "${GPU_PYTHON_BOOK_COMMAND:=}"
: "${GPU_PYTHON_BENCH_COMMAND:=python -m booktools bench}"
# The CUDA stack build-book.sbatch installs (`make setup GPU=...`): cuda13 needs NVIDIA driver 580 or newer,
# cuda12 driver 525 or newer (nvidia-smi shows the node's driver). `python -m gpukit doctor --gpu` on a GPU
# node says which one that node needs.
: "${GPU_PYTHON_STACK:=cuda13}"
# The GPU preflight every GPU template runs before its work (gpu_python_preflight): each library on the
# job's GPU, one line per check with its fix, within two minutes; a failure ends the job there, not an
# hour into it. Empty skips it: for an environment without gpukit (a conda environment of your own), or
# where every node is checked already (a Slurm health check or prolog). `=`, not `:=`: a value preset empty
# in the environment skips it too.
: "${GPU_PYTHON_PREFLIGHT_COMMAND=python -m gpukit doctor --gpu}"

export GPU_PYTHON_PARTITION GPU_PYTHON_ACCOUNT GPU_PYTHON_MODULES GPU_PYTHON_CONDA_ENV GPU_PYTHON_VENV \
    GPU_PYTHON_GPU_TYPES GPU_PYTHON_HOST_IP GPU_PYTHON_RAY_HEAD_TRIES GPU_PYTHON_MONITOR_SECONDS GPU_PYTHON_RESULTS \
    GPU_PYTHON_BOOK_COMMAND \
    GPU_PYTHON_BENCH_COMMAND GPU_PYTHON_STACK GPU_PYTHON_PREFLIGHT_COMMAND
if [ -n "$GPU_PYTHON_PARTITION" ]; then
    export SBATCH_PARTITION="$GPU_PYTHON_PARTITION" SALLOC_PARTITION="$GPU_PYTHON_PARTITION"
fi
if [ -n "$GPU_PYTHON_ACCOUNT" ]; then
    export SBATCH_ACCOUNT="$GPU_PYTHON_ACCOUNT" SALLOC_ACCOUNT="$GPU_PYTHON_ACCOUNT"
fi

# ---------------------------------------------------------------------------------------------------------
# Used inside jobs.

# Go to the folder the job was submitted from, load the modules, activate the Python environment, keep
# tool state inside the project, and print what the job got.
gpu_python_setup() {
    cd "${SLURM_SUBMIT_DIR:-.}" || return
    if [ -n "$GPU_PYTHON_MODULES" ]; then
        # shellcheck disable=SC2086  # one word per module is intended
        module load $GPU_PYTHON_MODULES
    fi
    # Activation scripts are not written for `set -u`.
    set +u
    if [ -n "$GPU_PYTHON_CONDA_ENV" ]; then
        eval "$(conda shell.bash hook)"
        conda activate "$GPU_PYTHON_CONDA_ENV"
    else
        # shellcheck source=/dev/null
        source "$GPU_PYTHON_VENV/bin/activate"
    fi
    set -u
    export MPLCONFIGDIR="$PWD/_build/cache/matplotlib" IPYTHONDIR="$PWD/_build/cache/ipython"
    mkdir -p "$MPLCONFIGDIR" "$IPYTHONDIR"
    echo "job ${SLURM_JOB_ID:-none} on ${SLURM_JOB_NODELIST:-$(hostname)}:" \
        "${SLURM_CPUS_PER_TASK:-?} CPUs per task, GPUs visible: ${CUDA_VISIBLE_DEVICES:-none}," \
        "python $(command -v python)"
}

# The GPU preflight (GPU_PYTHON_PREFLIGHT_COMMAND), run after gpu_python_setup so that it checks the job's
# own environment. It returns the preflight's non-zero status when a check fails, which under
# `set -euo pipefail` ends the job before its work starts.
gpu_python_preflight() {
    if [ -z "$GPU_PYTHON_PREFLIGHT_COMMAND" ]; then
        echo "GPU preflight skipped: GPU_PYTHON_PREFLIGHT_COMMAND is empty in the site file"
        return 0
    fi
    echo "GPU preflight on $(hostname): $GPU_PYTHON_PREFLIGHT_COMMAND"
    local status=0
    bash -c "$GPU_PYTHON_PREFLIGHT_COMMAND" || status=$?
    if [ "$status" -ne 0 ]; then
        echo "The job stops here: the GPU preflight failed (exit status $status). The lines above name each" \
            "failed check and its fix." >&2
        return "$status"
    fi
}

# The address of this node for servers other nodes must reach.
gpu_python_host_ip() {
    if [ -n "$GPU_PYTHON_HOST_IP" ]; then
        echo "$GPU_PYTHON_HOST_IP"
    else
        hostname --ip-address | cut -d' ' -f1
    fi
}

# Stop this user's processes whose command line names the folder $1: TERM, then KILL what is left after
# 5 s. ray.sbatch uses it for what a failed `ray start` leaves running. (pkill and pgrep read a regular
# expression: the folder's name is escaped.)
gpu_python_stop_processes_naming() {
    local pattern
    # shellcheck disable=SC2001  # one sed bracket expression escapes every special character at once
    pattern=$(sed 's/[][\\.*^$+?(){}|]/\\&/g' <<<"$1")
    pkill -u "$(id -u)" -f -- "$pattern" || true
    for _ in 1 2 3 4 5; do
        pgrep -u "$(id -u)" -f -- "$pattern" >/dev/null || return 0
        sleep 1
    done
    pkill -KILL -u "$(id -u)" -f -- "$pattern" || true
}

# A folder for this job's files inside the project: _build/cache/slurm/<job id>. Some tools write such a
# path into a file that cannot hold spaces (dask-jobqueue's #SBATCH lines), so where the project's path has
# spaces or quotes the folder is in your cache folder instead, which the nodes share like the home folder.
gpu_python_job_dir() {
    local base="$PWD/_build/cache/slurm"
    if ! printf '%s' "$base" | LC_ALL=C grep -qE '^[A-Za-z0-9_./+@-]+$'; then
        base="${XDG_CACHE_HOME:-$HOME/.cache}/gpu-python/slurm"
    fi
    local dir="$base/${SLURM_JOB_ID:-$$}"
    mkdir -p "$dir"
    echo "$dir"
}

# Log GPU use every GPU_PYTHON_MONITOR_SECONDS to gpu-usage-<job id>.csv while the job runs (stopped when
# the script exits). Watch it with `tail -f`, or look live: `srun --jobid=<id> --overlap nvidia-smi`.
gpu_python_monitor() {
    if ! command -v nvidia-smi >/dev/null 2>&1; then
        echo "nvidia-smi not found on $(hostname): no GPU usage log"
        return 0
    fi
    nvidia-smi
    nvidia-smi --query-gpu=timestamp,index,name,utilization.gpu,memory.used,memory.total \
        --format=csv -l "$GPU_PYTHON_MONITOR_SECONDS" > "gpu-usage-${SLURM_JOB_ID:-$$}.csv" &
    local monitor=$!
    # shellcheck disable=SC2064  # the pid is meant to be expanded now
    trap "kill $monitor 2>/dev/null || true" EXIT
}
