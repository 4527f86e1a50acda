"""Chapter 16 (Performance engineering on one GPU): the solutions and wrong answers of the exercises in
gpukit/exercises/performance.py (the kernel exercises' are in memory_access.py), for
tests/exercises/test_every_exercise.py.

ex-perf-predict-softmax is a prediction, ``predicted_ms(peak_flops, bandwidth)``: its wrong answers are the classic
miscounts. ex-perf-no-recompile returns a compiled function: its wrong answers recompile for new sizes (the default
compiles twice, ``dynamic=False`` once per size), compile nothing, or compute something else; the wasteful ones are
right and recompile."""

import torch

from gpukit.core.device import pick_device

SOFTMAX = {"rows": 512, "cols": 1024}


def predicted_ms(peak_flops, bandwidth, rows=512, cols=1024, flops_per_value=5, bytes_per_value=8):
    """The lesson's solution of ex-perf-predict-softmax, and (other arguments) its classic mistakes."""
    values = rows * cols
    return 1e3 * max(flops_per_value * values / peak_flops, bytes_per_value * values / bandwidth)


def softmax_prediction(**mistake):
    return lambda peak_flops, bandwidth: predicted_ms(peak_flops, bandwidth, **mistake)


def compile_for_any_batch(fn, backend):
    return torch.compile(fn, backend=backend, dynamic=True)


def marked_dynamic(fn, backend):  # the solution's other way: mark the batch dimension
    compiled = torch.compile(fn, backend=backend)

    def run(x, *args):
        torch._dynamo.mark_dynamic(x, 0)
        return compiled(x, *args)

    return run


def default_compile(fn, backend):  # compiles for the first size, then once more, dynamic
    return torch.compile(fn, backend=backend)


def static_compile(fn, backend):  # compiles for every size
    return torch.compile(fn, backend=backend, dynamic=False)


def not_compiled(fn, backend):
    return fn


def compiled_doubled(fn, backend):  # compiles once, computes something else
    compiled = torch.compile(fn, backend=backend, dynamic=True)
    return lambda x, *args: 2 * compiled(x, *args)


def raising(fn, backend):
    raise RuntimeError("not written yet")


SOLUTIONS = {
    "ex-perf-predict-softmax": lambda: (predicted_ms, {"device": pick_device(), **SOFTMAX}),
    "ex-perf-no-recompile": lambda: (compile_for_any_batch, {"device": pick_device()}),
}

WRONG_ANSWERS = {
    "ex-perf-predict-softmax": lambda: [
        (softmax_prediction(bytes_per_value=4), "values read only"),
        (softmax_prediction(bytes_per_value=16), "unfused softmax"),
        (softmax_prediction(flops_per_value=1), "one FLOP per value"),
        (lambda peak_flops, bandwidth: None, "replace the placeholder"),
        ("predicted_ms", "expected your function itself"),
    ],
    "ex-perf-no-recompile": lambda: [
        (default_compile, "compiled 2 times"),
        (static_compile, "compiled 6 times"),
        (not_compiled, "compiled nothing"),
        (compiled_doubled, "values differ"),
        (raising, "not written yet"),
        ("compile_for_any_batch", "expected your function itself"),
    ],
}
