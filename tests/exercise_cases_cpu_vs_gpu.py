"""Chapter 1 (CPU versus GPU): each exercise's solution, and wrong answers with a word the check's message must
contain."""

import numpy as np

SOLUTIONS = {
    "ex-cpu-gpu-matmul-flops": lambda: (2 * 3000**3, {}),
    "ex-cpu-gpu-transfer-share": lambda: (180 / 250, {}),
    "ex-cpu-gpu-ew-bytes": lambda: (80_000_000, {}),
}

WRONG_ANSWERS = {
    "ex-cpu-gpu-matmul-flops": lambda: [(3000**3, "too small"), ([3000, 3000], "expected a number")],
    "ex-cpu-gpu-transfer-share": lambda: [(60 / 130, "too small"), (None, "replace the placeholder")],
    "ex-cpu-gpu-ew-bytes": lambda: [(40_000_000, "too small"), (np.zeros(2), "expected a number")],
}
