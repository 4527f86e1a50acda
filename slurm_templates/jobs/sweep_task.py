"""One point of a parameter sweep, chosen by the job array's task id.

sweep-array.sbatch runs this once per array task: task i takes the i-th combination of the grid (the
learning rate varies slowest, the seed fastest) and writes its result to a JSON file of its own, which a
later step gathers. The work is a small ridge regression fitted by gradient descent.

    python slurm_templates/jobs/sweep_task.py TASK_ID OUTPUT_FOLDER
"""

import itertools
import json
import sys
from pathlib import Path

import numpy as np

LEARNING_RATES = (0.3, 0.1, 0.03, 0.01)
SEEDS = (0, 1, 2)
GRID = list(itertools.product(LEARNING_RATES, SEEDS))  # 12 points: --array=0-11


def fit(learning_rate: float, seed: int, steps: int = 200) -> float:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(500, 20))
    y = x @ rng.normal(size=20) + 0.1 * rng.normal(size=500)
    w = np.zeros(20)
    for _ in range(steps):
        w -= learning_rate * (x.T @ (x @ w - y) / len(y) + 1e-3 * w)
    return float(np.mean((x @ w - y) ** 2))


def main() -> None:
    task, out = int(sys.argv[1]), Path(sys.argv[2])
    if not 0 <= task < len(GRID):
        sys.exit(f"task {task} is outside the grid of {len(GRID)} points (0 to {len(GRID) - 1})")
    learning_rate, seed = GRID[task]
    out.mkdir(parents=True, exist_ok=True)
    result = {"task": task, "learning_rate": learning_rate, "seed": seed, "mse": fit(learning_rate, seed)}
    (out / f"task-{task:03d}.json").write_text(json.dumps(result))
    print(f"sweep task {task}: learning rate {learning_rate}, seed {seed}, mse {result['mse']:.4f}")


if __name__ == "__main__":
    main()
