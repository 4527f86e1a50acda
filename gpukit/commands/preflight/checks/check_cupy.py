"""The preflight's CuPy check: cuBLAS through ``cupy.matmul``, then a raw kernel (``preflight_sources.CUPY_KERNEL``)
that CuPy compiles with NVRTC."""

import cupy
import numpy as np
from preflight_child import report
from preflight_sources import CUPY_KERNEL, CUPY_KERNEL_NAME


def run():
    """cuBLAS through cupy.matmul, then a raw kernel that CuPy compiles with NVRTC."""
    n = 2048
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    got = cupy.asnumpy(cupy.matmul(cupy.asarray(a), cupy.asarray(b))[:8]).astype(np.float64)
    expected = a[:8].astype(np.float64) @ b.astype(np.float64)
    error = np.abs(got - expected).max() / np.abs(expected).max()
    if not error < 1e-3:
        raise RuntimeError(f"cupy.matmul is wrong: relative error {error:.1e} against float64")
    kernel = cupy.RawKernel(CUPY_KERNEL, CUPY_KERNEL_NAME, backend="nvrtc")
    x = cupy.arange(1000, dtype=cupy.float32)
    y = cupy.empty_like(x)
    threads = 256
    kernel(((x.size + threads - 1) // threads,), (threads,),
           (x, y, cupy.float32(2.5), cupy.int32(x.size)))
    if not bool(cupy.allclose(y, 2.5 * x)):
        raise RuntimeError("the RawKernel's result is wrong")
    built = cupy.cuda.runtime.runtimeGetVersion()
    nvrtc = ".".join(map(str, cupy.cuda.nvrtc.getVersion()))
    return {"detail": f"cupy.matmul (cuBLAS) and a RawKernel compiled by NVRTC {nvrtc} ran; CuPy "
                      f"{cupy.__version__} built for CUDA {built // 1000}.{built % 1000 // 10}"}


if __name__ == "__main__":
    report(**run())
