"""Chapter 11 (running on a SLURM cluster): each exercise's solution, and wrong answers with a word the
check's message must contain."""

from gpukit.exercises.slurm import SLURM_SWEEP

GPUS_PER_NODE, DATA_WORKERS = 4, 5

SOLUTIONS = {
    # One torchrun per node starts one process per GPU; each process is a main process plus its loaders.
    "ex-slurm-cpus-per-task": lambda: (GPUS_PER_NODE * (1 + DATA_WORKERS), {}),
    "ex-slurm-array": lambda: (
        f"0-{SLURM_SWEEP['learning_rates'] * SLURM_SWEEP['seeds'] - 1}%{SLURM_SWEEP['at_once']}", {}),
}

WRONG_ANSWERS = {
    "ex-slurm-cpus-per-task": lambda: [
        (2 * GPUS_PER_NODE * (1 + DATA_WORKERS), "too large"),  # counted both nodes: the request is per task
        (GPUS_PER_NODE * DATA_WORKERS, "too small"),  # forgot the main process
        ([GPUS_PER_NODE, 1 + DATA_WORKERS], "expected a number"),
    ],
    "ex-slurm-array": lambda: [
        ("1-20%6", "starts at 0"),
        ("0-20%6", "21 tasks"),
        ("0-19", "limit"),
        ("0-19%4", "lets 4"),
        ("0-9,11-20%6", "gaps"),
        ("0..19", "refuse"),
        (20, "string"),
    ],
}
