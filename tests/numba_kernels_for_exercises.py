"""Numba CUDA kernels for the chapter 9 exercise cases: right and wrong SAXPY kernels.

Imported only after the simulator is switched on (where there is no CUDA GPU). The kernels are module-level
functions on purpose: Numba's simulator swaps the ``cuda`` of a kernel's globals for its own, so a kernel
that reaches ``cuda`` through a closure instead fails there with "module 'numba.cuda' has no attribute".
"""

from numba import cuda


@cuda.jit
def saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_without_guard(a, x, y, out):
    i = cuda.grid(1)
    out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_thread_index_only(a, x, y, out):
    i = cuda.threadIdx.x  # the index within the block: every block does the first 32 items
    if i < out.size:
        out[i] = a * x[i] + y[i]


@cuda.jit
def axpy_wrong_formula(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * (x[i] + y[i])


def plain_saxpy(a, x, y, out):
    out[:] = a * x + y
