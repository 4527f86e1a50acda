"""Chapter 1 (CPU versus GPU): each exercise's solution, and wrong answers with a word the check's message must
contain. The wrong timing functions are the classic mistakes, as learners write them."""

import math
import statistics
import time

import numpy as np
import pytest
import torch

from gpukit.core.device import pick_device
from tests.exercises.cases import named

device = pick_device()


def wait_for(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
    elif device == "mps":
        torch.mps.synchronize()


def timed(f, *args, sync=lambda: wait_for(device)):
    f(*args)  # warm-up
    sync()
    start = time.perf_counter()
    f(*args)
    sync()
    return time.perf_counter() - start


def unsynchronised(f, *args, sync=lambda: wait_for(device)):
    f(*args)
    start = time.perf_counter()
    f(*args)
    return time.perf_counter() - start


def first_call(f, *args, sync=lambda: wait_for(device)):
    sync()
    start = time.perf_counter()
    f(*args)
    sync()
    return time.perf_counter() - start


def mean_with_the_first_call(f, *args, sync=lambda: wait_for(device)):
    times = []
    for _ in range(5):
        sync()
        start = time.perf_counter()
        f(*args)
        sync()
        times.append(time.perf_counter() - start)
    return statistics.mean(times)


def waits_for_the_device_itself(f, *args, sync=lambda: wait_for(device)):
    """Waits, but for the device rather than through the sync it is given (the caller's work is elsewhere)."""
    f(*args)
    wait_for(device)
    start = time.perf_counter()
    f(*args)
    wait_for(device)
    return time.perf_counter() - start


def warm_up_not_waited_for(f, *args, sync=lambda: wait_for(device)):
    f(*args)
    start = time.perf_counter()
    f(*args)
    sync()
    return time.perf_counter() - start


def in_milliseconds(f, *args, sync=lambda: wait_for(device)):
    return timed(f, *args, sync=sync) * 1e3


def without_a_sync_argument(f, *args):
    f(*args)
    wait_for(device)
    start = time.perf_counter()
    f(*args)
    wait_for(device)
    return time.perf_counter() - start


def make_wave(n):
    return torch.sin(torch.linspace(0, 2 * math.pi, n, device=device))


def float64_prediction():
    """The lesson's solution, on the CPU (whose peak gpukit estimates on any Linux machine with SIMD flags): the
    CPU has no datasheet bandwidth, so the lesson passes the copy it measured; a made-up 20 GB/s stands in here."""
    from gpukit.core.peaks import device_peak

    n, bandwidth = 512, 20e9
    peak64 = device_peak("cpu", "float64", operation="matmul")
    if peak64 is None:
        pytest.skip("no CPU peak can be estimated on this machine (no /proc/cpuinfo SIMD flags)")
    predicted_ms = 1e3 * max(2 * n**3 / peak64.flops_per_s, 3 * 8 * n * n / bandwidth)
    return predicted_ms, {"device": "cpu", "n": n, "bandwidth": bandwidth}


def float64_prediction_with(factor):
    answer, context = float64_prediction()
    return answer * factor


SOLUTIONS = {
    "ex-cpu-gpu-time-by-hand": lambda: (timed, {}),
    "ex-cpu-gpu-transfer-share": lambda: (180 / 250, {}),
    "ex-cpu-gpu-create-on-device": lambda: (make_wave, {}),
    "ex-cpu-gpu-predict-float64": float64_prediction,
}

WRONG_ANSWERS = {
    # On a CPU the float64 peak is half the float32 one, and the product is compute-bound at n = 512: the float32
    # peak and a multiply-add counted once both give half the time; seconds for milliseconds a thousandth.
    "ex-cpu-gpu-predict-float64": lambda: [
        (float64_prediction_with(0.5), "multiply-add"),
        (float64_prediction_with(1e-3), "a thousand times off"),
        (float64_prediction_with(1.5), "too large"),
        ("12 ms", "a number"),
    ],
    "ex-cpu-gpu-time-by-hand": lambda: [
        (unsynchronised, "the clock stopped when the work was queued"),
        (waits_for_the_device_itself, "never called the sync it was given"),
        (first_call, "it includes the first call"),
        (mean_with_the_first_call, "it includes the first call"),
        (warm_up_not_waited_for, "Call sync() before starting the clock"),
        (in_milliseconds, "looks like milliseconds"),
        (without_a_sync_argument, "keyword argument"),
        (timed(torch.matmul, torch.ones(8, 8), torch.ones(8, 8)), "pass the function itself"),
    ],
    "ex-cpu-gpu-transfer-share": lambda: [(60 / 130, "too small"), (None, "replace the placeholder")],
    "ex-cpu-gpu-create-on-device": lambda: [
        # Made with NumPy (float32, as the lesson's cell does), then copied.
        (named("made_with_numpy_then_copied",
               lambda n: torch.from_numpy(np.sin(np.linspace(0, 2 * np.pi, n, dtype=np.float32))).to(device)),
         "copies data onto the device"),
        (named("made_on_the_host_then_copied", lambda n: torch.sin(torch.linspace(0, 2 * math.pi, n)).to(device)),
         "copies data onto the device"),
        (named("numpy_values_given_to_torch_tensor",
               lambda n: torch.tensor(np.sin(np.linspace(0, 2 * np.pi, n)), dtype=torch.float32, device=device)),
         "copies data onto the device"),
        (named("left_on_the_host",
               lambda n: torch.from_numpy(np.sin(np.linspace(0, 2 * np.pi, n, dtype=np.float32)))),
         "creates no tensor with device="),
        (lambda n: torch.sin(torch.linspace(0, 2 * math.pi, n, dtype=torch.float64, device=device)),
         "dtype is torch.float64"),
        (lambda n: torch.sin(torch.linspace(0, 2 * math.pi, n, device="meta")), "on meta"),  # the wrong device
        (lambda n: torch.sin(torch.linspace(0, 2 * math.pi, n + 1, device=device))[:n], "values differ"),
        (make_wave(8), "pass the function itself"),
        (lambda n: None, "replace the placeholder"),  # the learner's cell as given
    ],
}


# The planted device mistakes (tests/exercises/test_planted_device_mistakes.py).
DEVICE_MISTAKES = {
    "ex-cpu-gpu-time-by-hand": {
        "unsynchronised": "stopped the clock without waiting for the device: it timed the launch, not the work",
        "waits_for_the_device_itself": "waited for the device named in the lesson rather than through the sync it "
                                       "was given, so work queued elsewhere is not waited for",
        "warm_up_not_waited_for": "started the clock while the warm-up call could still be running on the device",
    },
    "ex-cpu-gpu-create-on-device": {
        "made_with_numpy_then_copied": "made the wave with NumPy on the host, then copied it to the device",
        "made_on_the_host_then_copied": "made the wave with torch on the host (no device=), then copied it with .to()",
        "numpy_values_given_to_torch_tensor": "computed the values with NumPy, then torch.tensor(..., device=) "
                                              "copied them onto the device",
        "left_on_the_host": "made the wave on the host and never put it on the device",
    },
}
