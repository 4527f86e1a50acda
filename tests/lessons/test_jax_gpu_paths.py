"""Chapter 8 (JAX) as it runs on a GPU node, checked on the CPU: what the first H100 run found (issue 26).

- **Every rate printed for a `float32` product is a `float32` rate.** On NVIDIA GPUs since the A100, JAX's
  default precision rounds a `float32` product's inputs to TF32 (JAX's guide "Matmul precision"), and the
  H100 printed 344 TFLOP/s under the label of a plain matmul, five times the H100's `float32` peak. XLA's
  CPU ignores the precision, so the test reads what each timed call asks for instead: the lesson's cells
  run with `gpukit.benchmark` wrapped, and every call timed with `flops=` is lowered (`jax.jit(...).lower`)
  and its `dot_general`s read. A `float32` product must ask for `HIGHEST`, or its label must say that it ran
  at JAX's default precision; every label names its dtype.
- **The story of the default precision has a sentence for each outcome** (the default rounded, or it did
  not), both run here with the H100's errors and the CPU's.
- **The sharding section shows several devices on a machine with one GPU.** The H100 run printed a mesh of
  one device: the host-device flag was set only where there is no GPU. Here JAX is made to report one GPU
  (its default backend answers one device), the flag is left to the lesson, and the section must split its
  arrays over several devices all the same, with nothing on stderr.
"""

from __future__ import annotations

import json

from tests.support.lesson_code import lesson_cells, run_cells

LESSON = "08-jax.ipynb"

# The cell that sets JAX's environment, and the one that reports JAX's devices.
SETTINGS = ('os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"]', "default backend:")
SHARDING = ("from jax.sharding import Mesh", "describe_shards(sharded", "standardise_columns = jax.jit",
            "def column_sums", "jax.pmap(")

# JAX reports one GPU: its default backend answers one device (the CPU's first device stands in for the GPU,
# so that arrays can live there) and says it is "gpu"; jax.devices("cpu") is left as JAX has it.
ONE_GPU = """
import jax

_devices = jax.devices


def devices(backend=None):
    return _devices("cpu")[:1] if backend is None else _devices(backend)


jax.devices = devices
jax.default_backend = lambda: "gpu"
"""


def test_the_sharding_section_splits_over_several_devices_on_a_machine_with_one_gpu(tmp_path):
    settings, devices_cell = lesson_cells(LESSON, *SETTINGS)
    sources = ['device = "cuda"', settings, ONE_GPU, devices_cell, *lesson_cells(LESSON, *SHARDING)]
    run = run_cells(sources, tmp_path, unset=("XLA_FLAGS", "JAX_NUM_CPU_DEVICES"))
    assert run.returncode == 0, run.failed()
    mesh, placed, computed, summed, mapped = run.outputs[4:]
    shards = [line for line in placed.splitlines() if " holds data[" in line]
    assert len(shards) >= 2, f"the table was not split over several devices:\n{mesh}{placed}"
    assert len({line.split(" holds ")[0] for line in shards}) == len(shards)
    assert "same as on one device: True" in computed
    assert len([line for line in computed.splitlines() if " holds result[" in line]) == len(shards)
    assert f"({len(shards)}, " in mapped and "same as without pmap: True" in mapped
    assert run.stderr.strip() == "", run.stderr


# Wraps gpukit.benchmark before the lesson imports it: each call timed with flops= is lowered, and the
# precision of its float32 dot_generals recorded with its label; the real benchmark then runs.
SPY = """
import functools
import inspect
import json
import re

import gpukit

_benchmark = gpukit.benchmark
_own = set(inspect.signature(_benchmark).parameters)
TIMED = []


def benchmark(fn, *args, **kwargs):
    if kwargs.get("flops") is not None:
        import jax

        for_fn = {key: value for key, value in kwargs.items() if key not in _own}
        text = jax.jit(functools.partial(fn, **for_fn)).lower(*args).as_text()
        dots = [line for line in text.splitlines() if "dot_general" in line and "xf32>" in line]
        precisions = sorted({match for line in dots for match in re.findall(r"precision = \\[(\\w+)", line)})
        TIMED.append({"label": kwargs.get("label"), "float32_products": len(dots), "precisions": precisions})
    return _benchmark(fn, *args, **kwargs)


gpukit.benchmark = benchmark
"""
REPORT = "print('TIMED ' + json.dumps(TIMED))"


def timed_calls(tmp_path) -> list[dict]:
    settings, devices_cell = lesson_cells(LESSON, *SETTINGS)
    sources = ['device = "cpu"', SPY, settings, devices_cell,
               *lesson_cells(LESSON, "product.is_ready()", "print(benchmark(jnp.matmul",
                             "def default_dtypes", 'jax.config.update("jax_enable_x64", True)',
                             "spd32 = spd64.astype"), REPORT]
    run = run_cells(sources, tmp_path, unset=("XLA_FLAGS",))
    assert run.returncode == 0, run.failed()
    line = [line for line in run.stdout.splitlines() if line.startswith("TIMED ")]
    return json.loads(line[0][len("TIMED "):])


def precision_problems(timed: list[dict]) -> list[str]:
    """The timed calls whose rate would be read as float32 while the product may run in TF32."""
    problems = []
    for call in timed:
        label = call["label"] or "(no label)"
        if not call["float32_products"]:
            continue
        if "float32" not in label:
            problems.append(f"{label!r}: a float32 product whose label does not name its dtype")
        declared = "default precision" in label or "TF32" in label
        if call["precisions"] != ["HIGHEST"] and not declared:
            problems.append(f"{label!r}: a float32 product at precision {call['precisions']}, which JAX "
                            "computes in TF32 on NVIDIA GPUs since the A100, labelled as float32")
    return problems


def test_every_rate_of_a_float32_product_is_a_float32_rate_or_says_it_is_not(tmp_path):
    timed = timed_calls(tmp_path)
    assert any(call["float32_products"] for call in timed), timed
    assert precision_problems(timed) == []


def test_the_precision_check_catches_an_unlabelled_default_product():
    default = {"label": "8192 x 8192 matmul", "float32_products": 1, "precisions": ["DEFAULT"]}
    assert len(precision_problems([default])) == 2
    declared = {**default, "label": "matmul, float32, JAX's default precision"}
    assert precision_problems([declared]) == []
    assert precision_problems([{**default, "label": "matmul, float32", "precisions": ["HIGHEST"]}]) == []


def tf32_story(tmp_path, full: float, default: float, full_s: float, default_s: float) -> str:
    prelude = f"""
import jax
from gpukit import glue, glued
from gpukit.core.timing import Timing
from gpukit.measuring.speed_sentences import speed_phrase

can_x64, NO_JAX = True, "no JAX"
errors = {{"matmul, float32 vs float64": {full!r}, "matmul, default precision": {default!r}}}
linalg = {{("float32", "matmul"): Timing(samples=[{full_s!r}], label="full")}}
default32 = Timing(samples=[{default_s!r}], label="default")
"""
    (story,) = lesson_cells(LESSON, 'glue("tf32_story"')
    run = run_cells([prelude, story, "print(glued.tf32_story)"], tmp_path)
    assert run.returncode == 0, run.failed()
    return run.outputs[-1].strip()


def test_the_default_precision_story_has_a_sentence_for_each_outcome(tmp_path):
    # The H100's errors: 3e-4 at the default (TF32), about 1e-7 in float32, and the default 4 times faster.
    rounded = tf32_story(tmp_path, full=1.9e-7, default=3.0e-4, full_s=0.0104, default_s=0.0026)
    assert "rounded the inputs" in rounded and "3e-04" in rounded and "faster than" in rounded
    same = tf32_story(tmp_path, full=3.3e-7, default=3.3e-7, full_s=0.0046, default_s=0.0045)
    assert "computed full `float32`" in same and "about as fast as" in same
