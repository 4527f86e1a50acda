"""Chapter 16, Performance engineering on one GPU: what its exercises other than the kernel ones expect (those are in
:mod:`gpukit.exercises.memory_access`).

- ``ex-perf-predict-softmax``: ``predicted_ms(peak_flops, bandwidth)``, the least time of a fused float32 softmax
  over each row of a ``rows`` x ``cols`` matrix (5 FLOPs per value: the maximum, the subtraction, the exponential,
  the sum and the division; each value read once and each result written once, 8 bytes a value), tried on a
  compute-bound and a memory-bound device and on the run's own (:mod:`._predicting`). The classic mistakes: the
  bytes read only, an unfused softmax's three passes, 8 bytes a value, one FLOP a value.
- ``ex-perf-no-recompile``: ``compile_for_any_batch(fn, backend)``, returning ``fn`` compiled so that calls with
  any batch size compile it once. The check compiles a function of its own through a backend that counts the
  graphs it receives and runs them as they are (no code is generated, so the check is quick on a CPU), calls it on
  the lesson's ``device``
  with batch sizes drawn at random from 2 to 64 (six different ones, a fresh draw on each check: an answer cannot
  be tuned to the sizes), and fails it unless it compiled exactly once and gave the uncompiled function's results.
  ``torch._dynamo.reset()`` first forgets earlier compilations of the check's function, which would otherwise
  count against the limit of recompilations of its code.
"""

from __future__ import annotations

import random

from gpukit.base.errors import error_line

from ._predicting import Work, function_exercise
from .checking import Exercise, register
from .checking import keep_output as _keep
from .checking import kept_output as _kept
from .checking import not_a_function as _a_function

_VALUE_BYTES = 4  # float32
_FLOPS_PER_VALUE = 5


# ------------------------------------------------------------------------------------- ex-perf-predict-softmax
def _softmax(rows: int, cols: int, **_) -> Work:
    values = rows * cols
    return Work(_FLOPS_PER_VALUE * values, 2 * _VALUE_BYTES * values)


def _softmax_mistakes(rows: int, cols: int, **_) -> list[tuple[str, Work]]:
    values = rows * cols
    return [
        ("counting the values read only (each result is written too)",
         Work(_FLOPS_PER_VALUE * values, _VALUE_BYTES * values)),
        ("an unfused softmax's passes (read for the maximum, read for the sum, read and write to divide)",
         Work(_FLOPS_PER_VALUE * values, 4 * _VALUE_BYTES * values)),
        ("counting 8 bytes per value (float32 has 4)", Work(_FLOPS_PER_VALUE * values, 2 * 8 * values)),
        ("counting one FLOP per value (softmax does five)", Work(values, 2 * _VALUE_BYTES * values)),
    ]


# ------------------------------------------------------------------------------------- ex-perf-no-recompile
_BATCHES = 6  # different batch sizes per check
_FEATURES = 8


def _scaled_tanh(x, weight):
    """The check's function: a small layer, its batch in dimension 0 of ``x``."""
    import torch

    return torch.tanh(x @ weight) * 2.0 + x.sum(dim=1, keepdim=True)


def _compilations(answer, sizes, device):
    """Compile the check's function with ``answer`` through a counting backend; call it once per batch size.
    Returns (graphs compiled, results, expected results)."""
    import torch

    graphs = []

    def counting_backend(graph, example_inputs):
        graphs.append(graph)
        return graph.forward

    generator = torch.Generator().manual_seed(sum(sizes))
    weight = torch.randn(_FEATURES, _FEATURES, generator=generator).to(device)
    torch._dynamo.reset()  # earlier checks' compilations of _scaled_tanh would count against its limit
    compiled = answer(_scaled_tanh, counting_backend)
    if not callable(compiled):
        raise TypeError(f"compile_for_any_batch returned {type(compiled).__name__}, not a function to call")
    got, want = [], []
    for size in sizes:
        x = torch.randn(size, _FEATURES, generator=generator).to(device)
        got.append(compiled(x, weight))
        want.append(_scaled_tanh(x, weight))
    return graphs, got, want


def _compiles_once(answer, device) -> str | None:
    wrong = _a_function(answer, "compile_for_any_batch", "fn and backend")
    if wrong:
        return wrong
    import torch

    sizes = random.sample(range(2, 65), _BATCHES)
    try:
        graphs, got, want = _compilations(answer, sizes, device)
    except Exception as error:  # noqa: BLE001 - the learner's code can raise anything; say what
        return f"compile_for_any_batch, or the function it returned, raised {error_line(error)}"
    finally:
        torch._dynamo.reset()
    listed = ", ".join(map(str, sizes))
    if not graphs:
        return (f"called with batch sizes {listed}, your function compiled nothing: return fn compiled with "
                "torch.compile(..., backend=backend), so that its graphs go to the backend.")
    if len(graphs) > 1:
        return (f"called with batch sizes {listed}, your function was compiled {len(graphs)} times: it recompiled "
                "for new sizes. Make the batch dimension dynamic from the first call.")
    for size, mine, theirs in zip(sizes, got, want, strict=True):
        if not (isinstance(mine, torch.Tensor) and mine.shape == theirs.shape
                and torch.allclose(mine, theirs, rtol=1e-5, atol=1e-6)):
            return f"at batch size {size} the compiled function's values differ from the function's own."
    _keep(answer, 1)
    return None


register(
    function_exercise("ex-perf-predict-softmax", _softmax, _softmax_mistakes, dtype="float32",
                      operation="elementwise", needs=("device", "rows", "cols")),
    Exercise("ex-perf-no-recompile", lambda device: 1, needs=("device",), method=_compiles_once, result=_kept,
             rtol=0.0, writes="device code"),
)
