"""The kernel that the check of ex-kernels-launch launches through the learner's function.

Imported only by :mod:`gpukit.exercises.kernels`, after Numba's CUDA simulator is switched on where there is no CUDA
GPU (importing numba fixes the mode). The kernel is a module-level function on purpose: the simulator swaps the
``cuda`` of a kernel's globals for its own, which a kernel that reached ``cuda`` through a closure would miss.
"""

from numba import cuda


@cuda.jit
def double(x, out):
    i = cuda.grid(1)
    if i < out.size:  # the bounds guard: the learner's exercise is the grid, not the kernel
        out[i] = 2 * x[i]
