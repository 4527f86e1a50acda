"""pytest's hooks for the whole book: nbval runs each lesson as tests/support/lesson_solutions.py describes.

In the one execution that tests a lesson, each solution's code runs in a cell right after the solution, where it
must pass its exercise's check (the lesson's own solution text, proven on every machine nbval runs on: the CPU
here, a GPU on the GPU runner), and each hidden cell runs with names of its own, so that a visible cell that
needs a hidden cell's name fails as code copied from the page would.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import socket
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pytest

from tests.support import lesson_runs
from tests.support.lesson_solutions import as_tested

# The fixture `fake_cuda` (tests/support/fake_cuda.py): one stand-in CUDA GPU on a CPU-only PyTorch, for any test that
# runs the book's CUDA code paths here; `made_up_cpu` and `pcie5` (tests/support/made_up_machines.py): the CPU and the
# link the prediction tests work their figures out for.
pytest_plugins = ("tests.support.fake_cuda", "tests.support.made_up_machines")

# The tests run lessons side by side, one per worker, on as many cores as workers. By default the OpenMP threads of
# PyTorch's CPU build spin for a while after each parallel region, waiting for more work, and a spinning thread takes
# the core that the lesson beside it needs. Told to sleep instead, three lessons under nbval (02, 10 and 17, two
# workers on 2 cores) cost 105 core-seconds twice, against 119 and 131 spinning, and finished in 63 s, not 71-78.
# How threads wait changes how long work takes, never what it computes; `make book`, whose outputs readers see, leaves
# OpenMP as a learner's kernel has it. A value set before pytest starts is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

try:
    import resource
except ImportError:  # not on Windows, where the cost of each test is not measured
    resource = None

try:
    from nbval.plugin import IPyNbFile
except ImportError:  # nbval is the test extra's; without it there is nothing to adapt
    IPyNbFile = None


@contextmanager
def notebooks_read_as_tested(name: str):
    """nbval reads the notebook with nbformat.read inside its collector: hand it the notebook as tested."""
    read = nbformat.read

    def read_as_tested(*args, **kwargs):
        return as_tested(read(*args, **kwargs), name)

    nbformat.read = read_as_tested
    try:
        yield
    finally:
        nbformat.read = read


if IPyNbFile is not None:
    class LessonAsTested(IPyNbFile):
        """nbval's notebook, read as tested; its run is kept for the test site (tests/support/lesson_runs.py)."""

        def collect(self):
            with notebooks_read_as_tested(self.path.name):
                self.cells_as_tested = list(super().collect())
            yield from self.cells_as_tested

        def setup(self):
            self.started = time.perf_counter()
            super().setup()

        def teardown(self):
            try:
                lesson_runs.keep(self.path, self.cells_as_tested, time.perf_counter() - self.started,
                                 self.timed_out)
            finally:
                super().teardown()


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(file_path, parent):
    collected = yield
    if IPyNbFile is None:
        return collected
    return [LessonAsTested.from_parent(parent, path=file_path) if type(node) is IPyNbFile else node
            for node in collected]


# pytest-xdist hands out tests a file at a time (--dist loadfile in pyproject.toml): a notebook's cells share one
# kernel, and a test file's module fixtures (the site build, the test Slurm, the hub) are made once. These files'
# tests are independent and long, and are handed out one at a time instead, so that neither worker waits at the
# end for the other to finish a whole file. (xdist_group marks would say the same, but pytest-xdist 3.8's
# loadgroup does not group under pytest 9.2, whose tests' ids it can no longer extend.)
SPREAD_OVER_WORKERS = {"test_thin_kernel.py", "test_every_exercise.py"}

try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # without pytest-xdist the tests run in one process, and nothing is handed out
    LoadScopeScheduling = None

if LoadScopeScheduling is not None:
    class ByFileButSpreadingSome(LoadScopeScheduling):
        """loadfile's scheduling, with each test of SPREAD_OVER_WORKERS a unit of its own."""

        def _split_scope(self, nodeid: str) -> str:
            file = nodeid.split("::", 1)[0]
            return nodeid if Path(file).name in SPREAD_OVER_WORKERS else file

    def pytest_xdist_make_scheduler(config, log):
        if config.getvalue("dist") == "loadfile":
            return ByFileButSpreadingSome(config, log)
        return None


# How many test workers `-n auto` (pyproject.toml) starts: one per core this process may use (a Slurm job's or a
# container's share, not the whole machine's), 2 at the least, so that tests that wait on servers run beside tests
# that compute, and 4 at the most: beyond that the longest files (the hub, Slurm, the site: about 5 minutes each on
# 2 cores) set the run's time, and more lessons at once would share one GPU's memory. GitHub's standard Linux
# runner for public repositories has 4 cores (docs.github.com/en/actions/reference/runners/github-hosted-runners),
# where a fixed `-n 2` left half of them idle. PYTEST_XDIST_AUTO_NUM_WORKERS, or -n N, still decides when given.
TEST_WORKERS_AT_LEAST, TEST_WORKERS_AT_MOST = 2, 4


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def pytest_xdist_auto_num_workers(config):
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # pytest-xdist's own hook reads it
    return min(max(usable_cores(), TEST_WORKERS_AT_LEAST), TEST_WORKERS_AT_MOST)


SESSION_START = pytest.StashKey[float]()


def pytest_sessionstart(session):
    session.config.stash[SESSION_START] = time.time()


def pytest_terminal_summary(terminalreporter, config):
    """The lessons' counts, when this run wrote them (tests/book/test_lesson_counts.py: gpukit names, exercises;
    tests/book/test_readability.py: paragraphs; tests/exercises/test_planted_device_mistakes.py: the planted
    device mistakes); and what --lesson left out, and why."""
    for note in LESSON_NOTES:
        terminalreporter.write_line(note, yellow=True)
    table = Path(__file__).parent / "_build" / "lesson-counts.md"
    if table.is_file() and table.stat().st_mtime >= config.stash.get(SESSION_START, float("inf")):
        terminalreporter.write_sep("-", "what the lessons ask of a learner (tests/book/test_lesson_counts.py)")
        terminalreporter.write_line(table.read_text(encoding="utf-8"))
    for name, title in (("paragraph-lengths.md", "each lesson's longest paragraph, in words "
                                                 "(tests/book/test_readability.py)"),
                        ("planted-mistakes.md", "the planted device mistakes each check rejects "
                                                "(tests/exercises/test_planted_device_mistakes.py)")):
        table = Path(__file__).parent / "_build" / name
        if table.is_file() and table.stat().st_mtime >= config.stash.get(SESSION_START, float("inf")):
            terminalreporter.write_sep("-", title)
            terminalreporter.write_line(table.read_text(encoding="utf-8"))


# ------------------------------------------------------------------------------------------------------------------
# The contributor's quick loop. `make check` (pytest --quick) runs every test that starts no server and executes no
# lesson; `make test LESSON=03` (pytest --lesson 03) runs one lesson's tests. What a test is, is decided here, from
# what pytest can see: a notebook's cells (nbval) execute a lesson; a test that uses one of the fixtures below starts
# a server or executes lessons; LEFT_OUT_OF_CHECK names the tests that do either themselves, and those measured too
# slow for the loop. No list has to be remembered: every test `make check` keeps is watched while it runs (in
# `make test` too), and one that starts a server, a Jupyter kernel, a book build or a child pytest fails, saying
# what it started and what to add here (the watch, below; tests/book/test_quick_loop.py proves it). A test left out
# is marked server, lesson or slow (pytest -m 'not slow' and the like select by them).
FIXTURES_THAT_START_SERVERS = {
    "site": "builds the test site (jupyter-book; lessons without a cached run are executed)",
    "browser": "starts Chromium through Playwright's driver",
    "hub": "starts JupyterHub, a git server and a browser session",
    "cluster": "starts a test Slurm cluster (slurmctld, slurmd, munged)",
}
FIXTURES_THAT_EXECUTE_LESSONS = {
    "thin_ipython_dir": "runs whole lessons in a thin kernel",
}
# A test file, or one test of it (file::name, every parameter of it), with why `make check` leaves it out:
# "<server|lesson|slow>: why". A child pytest run counts as slow (pytest's start-up, collection, the run).
LEFT_OUT_OF_CHECK: dict[str, str] = {
    # Measured again on 2026-11-29, when chapters 16 and 17 and the planted mistakes had brought make check's tests
    # to 173 core-seconds (seconds are each test's wall time on a worker of two).
    "tests/exercises/test_every_exercise.py::test_wrong_answers_are_rejected_without_giving_the_answer_away"
    "[ex-perf-transpose-padded]": "slow: runs each wrong kernel on the simulator (3.4 s)",
    "tests/exercises/test_every_exercise.py::test_wrong_answers_are_rejected_without_giving_the_answer_away"
    "[ex-perf-transpose-tiled]": "slow: runs each wrong kernel on the simulator (3.1 s)",
    "tests/exercises/test_every_exercise.py::test_wrong_answers_are_rejected_without_giving_the_answer_away"
    "[ex-perf-block-sum]": "slow: runs each wrong kernel on the simulator (1.8 s)",
    "tests/exercises/test_performance.py::test_on_a_gpu_the_kernel_also_runs_there_and_must_match":
        "slow: each kernel compiled for a stand-in GPU and run on the simulator (2 to 2.9 s a kernel)",
    "tests/exercises/test_performance.py::test_each_transpose_check_draws_new_sizes_and_values_and_a_replayed_"
    "result_cannot_pass": "slow: checks each transpose twice on the simulator (2.3 s)",
    "tests/booktools/test_gpu_check.py::test_a_step_past_its_limit_is_stopped_with_its_children_and_the_kernel":
        "slow: waits out a step's time limit (3.5 s)",
    "tests/booktools/test_gpu_check.py::test_a_lesson_runs_as_tested_its_solutions_proven_on_the_device_and_is_"
    "kept_as_the_lesson": "slow: runs a small lesson cell by cell in a kernel of its own (3.4 s)",
    "tests/unit/measuring/test_overlap.py::test_sleeping_threads_overlap": "slow: sleeps in threads (3.0 s)",
    "tests/unit/base/test_nvcc.py::test_cupy_kernel_snippets_compile": "slow: nvcc compiles each snippet (2.6 s)",
    "tests/unit/core/test_peaks.py::test_a_non_editable_install_finds_its_tables":
        "slow: installs gpukit into a fresh folder (2.5 s)",
    "tests/book/test_gpu_runs.py::test_make_book_takes_a_kept_run_in_place_of_executing_and_runs_the_cpu_again_"
    "once_it_is_gone": "slow: runs make book's execution step twice (2.4 s)",
    "tests/unit/topics/test_memory_access.py::test_on_numbas_real_cuda_target_the_kernel_is_counted_on_the_"
    "simulator": "slow: compiles a kernel for a stand-in GPU, then runs it on the simulator (2.0 s)",
    # Measured on 2026-11-29, when make check's tests together took 153 core-seconds of their 140.
    "tests/unit/commands/test_preflight.py::test_a_non_editable_install_carries_the_checks_and_runs_them":
        "slow: installs gpukit into a fresh folder (3.8 core-seconds)",
    "tests/unit/commands/test_preflight.py::test_a_child_past_its_limit_is_stopped_with_what_it_started":
        "slow: waits out a child's time limit (3.0 core-seconds)",
    "tests/exercises/test_every_exercise.py::test_the_solution_passes[ex-jax-timed]":
        "slow: compiles and times JAX functions (3.6 core-seconds)",
    "tests/exercises/test_every_exercise.py::test_wrong_answers_are_rejected_without_giving_the_answer_away"
    "[ex-cpu-gpu-time-by-hand]": "slow: times each wrong timing function (3.1 core-seconds)",
    "tests/exercises/test_every_exercise.py::test_the_solution_passes[ex-autograd-fake-distances]":
        "slow: traces the answer on the fake-tensor device (2.9 core-seconds)",
    "tests/exercises/test_every_exercise.py::test_the_solution_passes[ex-kernels-launch]":
        "slow: runs the kernel in Numba's simulator (2.9 core-seconds)",
    "tests/exercises/test_distributed.py::test_a_correct_script_whose_rank_crashes_once_at_exit_passes_under_real_"
    "torchrun": "server: runs a DDP script under torchrun twice (about 15 core-seconds)",
    "tests/book/test_platforms.py": "slow: asks uv to resolve every platform's stack against the package index "
                                    "(network; 2 to 20 core-seconds a test)",
    "tests/book/test_drift.py": "slow: asks uv for the newest releases the pins allow (network; up to 11 "
                                "core-seconds a test)",
    "tests/book/test_execute_notebooks.py":
        "lesson: executes notebooks in Jupyter kernels (scripts/execute_notebooks.py)",
    "tests/lessons/test_gpu_branches.py": "lesson: runs the lessons' GPU branches in a Jupyter kernel (nbclient)",
    "tests/unit/topics/test_clusters.py::test_dask_cluster_listens_on_loopback_only": "server: starts a Dask cluster",
    "tests/unit/topics/test_clusters.py::test_listening_addresses_sees_a_loopback_server":
        "server: listens on the loopback",
    "tests/book/test_notebooks.py::test_stored_as_nbstripout_would_store_it":
        "slow: 21 core-seconds, nbstripout in a child per lesson (the commit hook runs it too)",
    "tests/unit/topics/test_chunking.py::test_the_chunk_halves_until_it_fits_and_the_result_is_unchanged":
        "slow: 10 core-seconds, six runs of a chunked computation",
    "tests/book/test_gpu_runs.py::test_a_run_made_by_make_gpu_check_is_what_the_page_shows_until_the_"
    "lessons_code_changes":
        "lesson: 32 core-seconds, make gpu-check runs a lesson, then the book is built",
    "tests/book/test_new_lesson.py":
        "lesson: about 60 core-seconds, a new lesson's tests (its notebook under nbval) in a child pytest",
    "tests/exercises/test_performance_toolkit.py":
        "slow: 6 core-seconds, lesson 16's kernel checks on the simulator with a toolkit library hidden",
    "tests/lessons/test_performance_tools.py::test_an_nvcc_that_does_not_finish_is_stopped_and_there_is_no_program":
        "slow: waits 1 s for a stand-in nvcc to pass its limit",
    "tests/lessons/test_performance_tools.py::test_a_sanitizer_that_does_not_finish_is_stopped_at_its_limit":
        "slow: waits 1 s for a stand-in compute-sanitizer to pass its limit",
    "tests/lessons/test_performance_tools.py::test_an_ncu_that_does_not_finish_is_stopped_at_its_limit":
        "slow: waits 1 s for a stand-in ncu to pass its limit",
    "tests/lessons/test_numba_lessons_gpu_required.py":
        "slow: 14 core-seconds, lessons 09 and 16's Numba cells in child Pythons on the simulated node",
    "tests/book/test_wheelhouse.py::test_on_a_gpu_node_without_network_gpu_check_installs_from_the_wheelhouse_"
    "and_keeps_two_lessons":
        "lesson: make wheelhouse downloads (network), then gpu-check installs from it and runs two lessons",
    "tests/booktools/test_gpu_check.py::test_a_nine_minute_window_on_the_simulated_node_keeps_each_lesson_as_"
    "it_passes_and_the_next_continues":
        "slow: two 5.4 s windows of gpu-check, scaled 100 times, and a probe in a child Python (torch)",
    "tests/book/test_hub_config.py::test_a_state_folder_others_can_write_to_is_refused":
        "slow: 3 core-seconds, a child Python and file permissions",
    "tests/book/test_layers.py::test_a_private_name_from_another_module_is_found":
        "slow: 3 core-seconds, parses and imports all of gpukit",
    "tests/book/test_layers.py::test_an_unexplained_import_in_a_function_is_found":
        "slow: 2 core-seconds, parses and imports all of gpukit",
    "tests/book/test_layers.py::test_the_front_door_and_flat_modules_are_found":
        "slow: 3 core-seconds, parses and imports all of gpukit",
    "tests/book/test_setup_cell.py::test_without_the_repository_the_cell_installs_gpukit_with_pip":
        "slow: 9 core-seconds, pip installs gpukit into a new environment",
    "tests/exercises/test_every_exercise.py::test_the_solution_passes[ex-dist-allreduce-by-hand]":
        "server: 7 core-seconds, torchrun (a rendezvous store) runs the solution",
    "tests/exercises/test_every_exercise.py::test_the_solution_passes[ex-dist-ddp-script]":
        "server: 9 core-seconds, torchrun (a rendezvous store) runs the solution",
    "tests/exercises/test_every_exercise.py::test_wrong_answers_are_rejected_without_giving_the_answer_"
    "away[ex-cupy-rawkernel]":
        "slow: 4 core-seconds, the exercise's check compiles the kernel",
    "tests/exercises/test_every_exercise.py::test_wrong_answers_are_rejected_without_giving_the_answer_"
    "away[ex-dist-allreduce-by-hand]":
        "server: 32 core-seconds, torchrun (a rendezvous store) runs each wrong answer",
    "tests/exercises/test_every_exercise.py::test_wrong_answers_are_rejected_without_giving_the_answer_"
    "away[ex-dist-ddp-script]":
        "server: 35 core-seconds, torchrun (a rendezvous store) runs each wrong answer",
    "tests/exercises/test_every_exercise.py::test_wrong_answers_are_rejected_without_giving_the_answer_"
    "away[ex-jax-timed]":
        "slow: 8 core-seconds, the exercise's check times JAX",
    "tests/exercises/test_jax.py": "slow: 15 core-seconds, the exercise's check times JAX thrice with a neighbour",
    # Three that mostly wait, holding one of the loop's two workers: the loop had come to 87 to 93 s of pytest.
    "tests/booktools/test_gpu_check.py::test_a_lesson_runs_cell_by_cell_and_stops_at_its_limit":
        "slow: 8 s, a kernel runs a tiny lesson into its 7 s limit",
    "tests/unit/topics/test_distributed.py::test_processes_that_overrun_are_stopped":
        "slow: 7 s, processes run into a 5 s timeout",
    "tests/book/test_slurm_templates.py::test_site_file_stops_the_processes_that_name_a_folder_and_no_others":
        "slow: 5 s, processes are started and stopped by the site file",
    "tests/lessons/test_jax_gpu_paths.py::test_every_rate_of_a_float32_product_is_a_float32_rate_or_says_it_is_not":
        "slow: 4 core-seconds, the lesson's JAX cells in a child Python",
    "tests/lessons/test_jax_gpu_paths.py::test_the_default_precision_story_has_a_sentence_for_each_outcome":
        "slow: 5 core-seconds, the lesson's JAX cells in a child Python",
    "tests/lessons/test_writing_kernels_gpu_paths.py::test_numba_cells_skip_with_the_cause_and_fix_where_"
    "numba_cudas_target_fails":
        "slow: 2 core-seconds, runs the lesson's kernels in child Pythons",
    "tests/lessons/test_writing_kernels_gpu_paths.py::test_the_timing_cells_time_the_gpus_work_with_do_bench_events":
        "slow: 13 core-seconds, runs the lesson's kernels in child Pythons",
    "tests/lessons/test_writing_kernels_gpu_paths.py::test_where_numba_works_the_check_says_so_and_the_kernels_run":
        "slow: 3 core-seconds, runs the lesson's kernels in child Pythons",
    "tests/lessons/test_writing_kernels_gpu_paths.py::test_with_a_gpu_required_the_lesson_stops_at_the_"
    "check_with_the_sentence":
        "slow: 2 core-seconds, runs the lesson's kernels in child Pythons",
    "tests/lessons/test_performance_compile.py::test_torch_logs_show_each_recompilation_with_its_guard_and_the_"
    "graph_break":
        "slow: 4 core-seconds, torch.compile with TORCH_LOGS in a child Python",
    "tests/lessons/test_performance_compile.py::test_explain_counts_the_graphs_and_the_break_without_writing_to_"
    "stderr":
        "slow: 3 core-seconds, the lesson's explain cell in a child Python",
    "tests/lessons/test_training_at_scale_gpu_paths.py::test_outputs_stops_a_rank_that_overruns_by_its_pid":
        "slow: 3 core-seconds, starts ranks in child Pythons and stops one by its pid",
    "tests/lessons/test_training_at_scale_gpu_paths.py::test_the_fsdp2_job_on_a_gpu_node_keeps_its_gloo_ranks_off_"
    "the_gpu":
        "server: about 9 core-seconds, two gloo ranks on the loopback run the lesson's FSDP2 script",
    "tests/unit/topics/test_memory_access.py::test_a_missing_barrier_is_a_race_on_every_run":
        "slow: 2 core-seconds, Numba's simulator launched at two thread switch intervals",
    "tests/lessons/test_precision_training.py::test_the_regression_learns_at_the_gpus_width_in_both_precisions":
        "slow: 8 core-seconds, trains the lesson's regression in both precisions",
    "tests/lessons/test_profiling_training.py::test_the_lessons_training_learns_at_both_sizes":
        "slow: 2 core-seconds, trains the lesson's model",
    "tests/lessons/test_prose_lesson_cells.py::test_closing_the_dask_cluster_prints_nothing_on_stderr":
        "server: 2 core-seconds, starts the lesson's Dask cluster in a child Python",
    "tests/lessons/test_prose_lesson_cells.py::test_the_batched_products_print_no_rate_that_rounds_to_zero":
        "slow: 3 core-seconds, the lesson's cells in a child Python",
    "tests/lessons/test_prose_lesson_cells.py::test_the_dynamo_warning_is_printed_without_the_builders_folders":
        "slow: 4 core-seconds, torch.compile in a child Python",
    "tests/lessons/test_prose_lesson_cells.py::test_the_inductor_warning_is_printed_without_the_builders_folders":
        "slow: 18 core-seconds, torch.compile in a child Python",
    "tests/lessons/test_ray_in_network_namespace.py::test_ray_cells_reproduce_the_serial_result_in_a_"
    "loopback_only_namespace":
        "server: 16 core-seconds, starts Ray in a loopback-only network namespace",
    "tests/unit/commands/test_doctor.py::test_doctor_command_prints_report_and_sets_exit_status":
        "slow: 4 core-seconds, gpukit doctor in a child Python",
    "tests/booktools/test_gpu_check.py::test_without_a_gpu_the_command_stops_at_once_and_says_why_first":
        "slow: 4 core-seconds, booktools gpu-check in a child Python",
    "tests/booktools/test_gpu_node_suite.py::test_the_gpu_tests_pass_on_a_simulated_gpu_node":
        "slow: 85 core-seconds, runs the GPU tests in a child pytest on a simulated GPU node",
    "tests/unit/commands/test_preflight.py::test_the_mac_probe_script_on_the_cpu":
        "slow: 2 core-seconds, the preflight's check scripts in child Pythons",
    "tests/unit/commands/test_preflight.py::test_torch_matmul_script_on_the_cpu":
        "slow: 2 core-seconds, the preflight's check scripts in child Pythons",
    "tests/unit/commands/test_preflight.py::test_triton_script_in_the_interpreter":
        "slow: 3 core-seconds, the preflight's check scripts in child Pythons",
    "tests/unit/commands/test_preflight.py::test_triton_script_refuses_the_interpreter":
        "slow: 2 core-seconds, the preflight's check scripts in child Pythons",
    "tests/unit/commands/test_preflight.py::test_the_command_without_a_gpu_prints_a_skip_line_per_check_and_fails":
        "slow: 2 core-seconds, the preflight's check scripts in child Pythons",
    "tests/unit/commands/test_preflight.py::test_torch_matmul_script_refuses_a_torch_that_sees_no_gpu":
        "slow: 2 core-seconds, the preflight's check scripts in child Pythons",
    "tests/unit/commands/test_preflight.py::test_the_preflight_has_no_markdown_form":
        "slow: 2 core-seconds, the preflight's check scripts in child Pythons",
    "tests/unit/commands/test_preflight.py::test_nccl_script_with_gloo_on_the_cpu":
        "slow: 2 core-seconds, the preflight's check scripts in child Pythons",
    "tests/unit/commands/test_preflight.py::test_nccl_script_with_a_torch_without_nccl":
        "slow: 2 core-seconds, the preflight's check scripts in child Pythons",
    "tests/book/test_glossary.py::test_usage_report":
        "slow: 2 core-seconds, reads every lesson for the glossary's terms",
    "tests/lessons/test_training_at_scale_gpu_paths.py::test_the_flight_recorder_cell_runs_on_nccl":
        "slow: 2 core-seconds, the lesson's flight-recorder cell starts its stand-in ranks",
    "tests/exercises/test_pytorch.py::test_other_right_answers_pass":
        "slow: 2 core-seconds, torch.compile and vmap of the right answers",
    "tests/unit/commands/test_preflight_gpu_node.py::test_forcing_a_library_away_nccl_out_of_torch_and_numpy_2_5":
        "slow: 2 core-seconds, the preflight's checks in child Pythons on a simulated node",
    "tests/unit/commands/test_preflight_gpu_node.py::test_hiding_the_gpu_hides_it_from_every_library_as_cuda_would":
        "slow: 3 core-seconds, the preflight's checks in child Pythons on a simulated node",
    "tests/unit/commands/test_preflight_gpu_node.py::test_jax_platforms_cpu_keeps_jax_on_the_cpu":
        "slow: 3 core-seconds, the preflight's checks in child Pythons on a simulated node",
    "tests/unit/commands/test_preflight_gpu_node.py::test_the_machine_as_it_is_without_the_simulation":
        "slow: 2 core-seconds, the preflight's checks in child Pythons on a simulated node",
    "tests/unit/commands/test_preflight_gpu_node.py::test_the_simulated_node_has_what_the_h100_node_had":
        "slow: 3 core-seconds, the preflight's checks in child Pythons on a simulated node",
    "tests/unit/test_import.py::test_importing_every_gpukit_module_leaves_the_environment_as_it_was":
        "slow: 3 core-seconds, imports every gpukit module in a child Python",
    "tests/unit/topics/test_compile_cache.py::test_torch_compile_writes_into_the_chosen_folder":
        "slow: 13 core-seconds, torch.compile in a child Python",
    "tests/unit/topics/test_distributed.py::test_two_gloo_processes_all_reduce_on_loopback":
        "server: 5 core-seconds, torchrun (a rendezvous store) runs a gloo all-reduce",
    "tests/unit/topics/test_distributed.py::test_a_failing_rank_is_reported": "server: torchrun (a rendezvous store)",
    "tests/unit/topics/test_extensions.py::test_the_cuda_extension_sources_compile_against_pytorchs_headers":
        "slow: 26 core-seconds, compiles the CUDA extension against PyTorch's headers",
    "tests/book/test_quick_loop.py::test_a_test_that_starts_a_server_or_a_child_pytest_fails_in_any_run_and_make_"
    "check_leaves_out_the_rest": "slow: runs pytest in a child, twice",
    "tests/book/test_quick_loop.py::test_make_check_fails_on_a_test_over_its_budget": "slow: runs pytest in a child",
}
# What a test, a test file and all of them may cost `make check`, in core-seconds (the test's process and the children
# it waited for, setup to teardown): 90 s on 2 cores is 180, less lint, pytest's start and collection on each
# worker. The tests left out above as slow were measured at 2 core-seconds or more (on a loaded machine); a test,
# file or total over its budget fails `make check` with its cost: make it cheaper, or leave it out here as slow.
CHECK_TEST_BUDGET_S = 5.0
CHECK_FILE_BUDGET_S = 25.0
CHECK_BUDGET_S = 140.0

QUICK_KINDS = ("server", "lesson", "slow")


def pytest_addoption(parser):
    group = parser.getgroup("gpu-python", "the book's quick loop (make check, make test LESSON=NN)")
    group.addoption("--quick", action="store_true",
                    help="only the tests that start no server and execute no lesson (make check)")
    group.addoption("--lesson", metavar="NN", default=None,
                    help="only lesson NN's tests: its notebook, thin kernel, exercises and page (make test LESSON=NN)")


def pytest_configure(config):
    for kind, what in (("server", "starts a server (left out of make check)"),
                       ("lesson", "executes a lesson (left out of make check)"),
                       ("slow", "too slow for make check's 90 s (left out of it)")):
        config.addinivalue_line("markers", f"{kind}: {what}")
    if config.getoption("lesson") is not None:
        config.stash[LESSON] = lesson_notebook(config.getoption("lesson"))
    install_the_watch()
    if config.getoption("quick") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(CheckBudget(), "make-check-budget")
    elif config.getoption("lesson") is None and not hasattr(config, "workerinput"):
        config.pluginmanager.register(LessonCosts(), "lesson-costs")


def relative_id(item) -> str:
    """``tests/book/test_site.py::test_page`` (no parameters), from the book's folder whatever pytest's rootdir."""
    path = Path(item.path)
    try:
        path = path.resolve().relative_to(ROOT)
    except ValueError:
        pass
    name = getattr(item, "originalname", None) or item.name.split("[")[0]
    return f"{path.as_posix()}::{name}"


def left_out_because(item) -> tuple[str, str] | None:
    """(kind, why) where `make check` leaves ``item`` out: kind is server, lesson or slow."""
    if Path(item.path).suffix == ".ipynb":
        return "lesson", "a lesson's cells under nbval"
    fixtures = set(getattr(item, "fixturenames", ()))
    for name, why in FIXTURES_THAT_EXECUTE_LESSONS.items():
        if name in fixtures:
            return "lesson", f"uses the fixture {name}, which {why}"
    for name, why in FIXTURES_THAT_START_SERVERS.items():
        if name in fixtures:
            return "server", f"uses the fixture {name}, which {why}"
    test = relative_id(item)
    file = test.split("::")[0]
    for key in (f"{file}::{item.name}", test, file):  # the test with its parameters, the test, its file
        if key in LEFT_OUT_OF_CHECK:
            why = LEFT_OUT_OF_CHECK[key]
            return why.split(":", 1)[0], why
    return None


# --lesson NN: which tests are that lesson's
ROOT = Path(__file__).resolve().parent
LESSON = pytest.StashKey[Path]()
EXERCISE_LABEL = re.compile(r"""check\(\s*["'](ex-[\w-]+)["']""")


def lessons() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))


def lesson_notebook(number: str) -> Path:
    found = [path for path in lessons() if path.name.split("-")[0] == number]
    if len(found) != 1:
        raise pytest.UsageError(f"--lesson {number!r} is not a lesson; the lessons are: "
                                + " ".join(path.name.split("-")[0] for path in lessons()))
    return found[0]


def exercise_labels(notebook: Path) -> set[str]:
    """The exercise labels lesson ``notebook`` checks: its solutions' labels and its check("...") calls."""
    from tests.support.lesson_solutions import solutions_in  # lazy: only --lesson reads a lesson's exercises

    labels = set()
    for cell in nbformat.read(notebook, as_version=4).cells:
        labels.update(label for label, _ in solutions_in(cell))
        if cell.cell_type == "code":
            labels.update(EXERCISE_LABEL.findall(cell.source))
    return labels


def exercise_chapters(labels: set[str]) -> set[str]:
    """The gpukit/exercises modules that register those labels (the chapter names of tests/exercises/)."""
    chapters = set()
    for module in (ROOT / "gpukit" / "exercises").glob("*.py"):
        if module.stem not in ("__init__", "checking"):
            text = module.read_text(encoding="utf-8")
            chapters.update(module.stem for label in labels if f'"{label}"' in text or f"'{label}'" in text)
    return chapters


def lessons_tests(items, notebook: Path) -> list:
    """Lesson ``notebook``'s tests among ``items``: its cells under nbval, its thin-kernel run, its exercises'
    checks (test_every_exercise's for its labels, the whole of tests/exercises/test_<chapter>.py), its tests in
    tests/lessons (its GPU paths, its predictions: those make bench's table counts as its own) and its page in
    the site test (the page's own tests; the site is built whole, from the book's cache where it has the lesson)."""
    labels = exercise_labels(notebook)
    chapter_files = {f"test_{chapter}.py" for chapter in exercise_chapters(labels)}
    page = f"notebooks/{notebook.stem}"
    kept, site_needs = [], None
    for item in items:
        path = Path(item.path)
        params = getattr(getattr(item, "callspec", None), "params", {})
        if path.suffix == ".ipynb":
            keep = path.name == notebook.name
        elif path.name == "test_thin_kernel.py":
            keep = getattr(params.get("path"), "name", None) == notebook.name
        elif path.parent.name == "lessons":
            keep = lesson_of_lessons_test(item.nodeid, path) == notebook.stem
        elif path.name == "test_every_exercise.py":
            keep = params.get("label") in labels
        elif path.parent.name == "exercises":
            keep = path.name in chapter_files
        elif path.name in ("test_site.py", "test_jupyterhub.py"):
            # The hub's session opens every lesson at once, so its tests (fixture hub) are left to `make test`.
            keep = params.get("doc") == page and "hub" not in getattr(item, "fixturenames", ())
            if keep and site_needs is None:
                site_needs = lessons_the_site_would_execute(notebook)
            keep = keep and not site_needs
        else:
            keep = False
        if keep:
            kept.append(item)
    if site_needs:
        LESSON_NOTES.append(f"{notebook.stem}'s page is not tested: the test site is built whole, and it would execute "
                            f"{', '.join(site_needs)} first (no run in make book's cache): run make book, then this")
    return kept


@functools.cache
def lesson_of_lessons_file(path: Path) -> str | None:
    from tests.support.lesson_costs import lesson_of_file  # lazy: only --lesson and a whole run's table need it

    return lesson_of_file(path.read_text(encoding="utf-8"), [notebook.stem for notebook in lessons()])


def lesson_of_lessons_test(nodeid: str, path: Path) -> str | None:
    """The lesson (a notebook's stem) a test under tests/lessons is about, as make bench's table counts it: the one
    its file names, or in a file about several, the one its parameters or name name."""
    from tests.support.lesson_costs import lesson_of_test

    return lesson_of_lessons_file(path) or lesson_of_test(nodeid, [notebook.stem for notebook in lessons()])


LESSON_NOTES: list[str] = []
BOOK_CACHE = ROOT / "_build" / ".jupyter_cache"


def lessons_the_site_would_execute(notebook: Path) -> list[str]:
    """The lessons besides ``notebook`` that the test site's build would execute (tests/support/site_build.py): those
    with no run in `make book`'s execution cache and no GPU run kept for their code. ``notebook`` itself is not
    counted: the site takes this test run's nbval run of it."""
    # lazy: jupyter_cache and the GPU runs are read only for --lesson
    from jupyter_cache import get_cache

    from booktools.gpu_runs import lesson_code_hash, load_gpu_runs, runs_of_lesson

    cache = get_cache(str(BOOK_CACHE)) if BOOK_CACHE.is_dir() else None
    runs, missing = load_gpu_runs(ROOT), []
    for path in lessons():
        if path == notebook:
            continue
        lesson = nbformat.read(path, as_version=4)
        if runs_of_lesson(runs, path.stem, lesson_code_hash(lesson))[0] is not None:
            continue
        try:
            found = cache.match_cache_notebook(lesson) if cache else None
        except KeyError:
            found = None
        if found is None:
            missing.append(path.stem.split("-")[0])
    return missing


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        found = left_out_because(item)
        if found:
            item.add_marker(found[0])
    kept = items
    if LESSON in config.stash:
        kept = lessons_tests(kept, config.stash[LESSON])
    if config.getoption("quick"):
        kept = [item for item in kept if left_out_because(item) is None]
    if len(kept) != len(items):
        chosen = set(map(id, kept))
        config.hook.pytest_deselected(items=[item for item in items if id(item) not in chosen])
        items[:] = kept


# The watch: what a test of `make check` must not start. It is on for every test that left_out_because keeps in,
# in every run, so `make test` fails such a test as `make check` would. Python's audit hooks (PEP 578) see every
# child process started through subprocess (asyncio's included: Playwright's driver, jupyter_client's kernels), and
# socket.socket.listen is wrapped to see servers started in the test's own process (http.server, asyncio, tornado:
# Dask's scheduler). A server a child starts is seen as that child: its program is named in SERVER_PROGRAMS. A child's
# own children are not seen (`make gpu-check` run by a test runs its lessons a level further down): such a test is
# slow, and make check's budget below fails it.
SERVER_PROGRAMS = {
    "jupyterhub", "jupyter-lab", "jupyter-server", "jupyter-notebook", "configurable-http-proxy", "slurmctld",
    "slurmd", "slurmdbd", "munged", "dask-scheduler", "dask-worker", "ipcluster", "ipcontroller", "ipengine",
    "chromium", "chromium-browser", "chrome", "google-chrome", "node", "gcs_server", "raylet", "redis-server",
    "torchrun",  # its rendezvous store listens while it runs
}
SERVER_MODULES = {"http.server", "jupyterhub", "jupyterlab", "jupyter_server", "notebook", "ipyparallel",
                  "distributed.cli.dask_scheduler", "distributed.cli.dask_worker", "ray", "torch.distributed.run"}
KERNEL_MODULES = {"ipykernel_launcher", "ipykernel"}
BOOK_BUILDS = {"jupyter-book", "jb", "execute_notebooks.py"}


WRAPPERS = {"env", "nice", "timeout", "unshare", "nsenter", "sudo", "setsid", "stdbuf", "ip", "srun", "numactl"}
SHELLS = {"sh", "bash", "dash", "zsh"}


def started(argv: list[str]) -> str | None:
    """What the command ``argv`` starts that a `make check` test must not: a server, a Jupyter kernel (a notebook
    executed), a book build or a child pytest; None for anything else (a child Python, nvcc, git, make)."""
    if not argv:
        return None
    program, args = Path(argv[0]).name, argv[1:]
    if program in SHELLS and "-c" in args[:-1]:  # each command of the line: cd x && jupyterhub -f config.py
        lexer = shlex.shlex(args[args.index("-c") + 1], posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            words = list(lexer)
        except ValueError:
            return None
        commands, command = [], []
        for word in [*words, ";"]:
            if word and set(word) <= set(";&|()"):
                commands.append(command)
                command = []
            else:
                command.append(word)
        return next(filter(None, map(started, commands)), None)
    if program in WRAPPERS:  # env X=1 nice -n 10 timeout 60 unshare -n python -m ...: what it runs
        return next(filter(None, (started(args[i:]) for i in range(len(args)))), None)
    if program in SERVER_PROGRAMS:
        return f"a server ({program})"
    if program in ("pytest", "py.test"):
        return "a child pytest run"
    if program in BOOK_BUILDS:
        return f"a book build, which executes lessons ({program})"
    if program == "git" and "daemon" in args[:2]:
        return "a server (git daemon)"
    if program in ("jupyter", "jupyter-nbconvert", "jupyter-execute"):
        if program == "jupyter-execute" or args[:1] == ["execute"] or "--execute" in args:
            return "a notebook executed (jupyter nbconvert --execute)"
        if args[:1] and args[0] in ("lab", "server", "notebook", "hub", "kernel"):
            return f"a server (jupyter {args[0]})"
        return None
    if re.fullmatch(r"python[0-9.]*", program):
        module = args[args.index("-m") + 1] if "-m" in args[:-1] else None
        script = None if module or "-c" in args else next((Path(a).name for a in args if not a.startswith("-")), None)
        if module in KERNEL_MODULES:
            return "a Jupyter kernel (a notebook executed)"
        if module == "pytest":
            return "a child pytest run"
        if module in SERVER_MODULES:
            return f"a server (python -m {module})"
        if module in ("jupyter_book", "nbconvert") or script in BOOK_BUILDS:
            return f"a book build or a notebook executed ({module or script})"
        if module == "booktools" and "gpu-check" in args:
            return "booktools gpu-check, which executes lessons"
    return None


class Watch:
    """The test being watched (None between tests and for the tests left out) and what it has started."""

    item = None
    seen: list[str] = []


def seen_in_child(event: str, args: tuple) -> None:
    """The audit hook: a child process a watched test starts (subprocess.Popen, os.exec*, os.posix_spawn)."""
    if Watch.item is None or event not in ("subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn"):
        return
    command = args[1] if event != "os.spawn" else args[2]
    if isinstance(command, (str, bytes)):
        argv = os.fsdecode(command).split()
    else:
        argv = [os.fsdecode(a) if isinstance(a, (str, bytes, os.PathLike)) else str(a) for a in command or ()]
    what = started(argv)
    if what:
        Watch.seen.append(f"{what}: {' '.join(argv)[:200]}")


def install_the_watch() -> None:
    if getattr(socket.socket.listen, "watched", False):
        return  # once per process (pytester and nested configs call pytest_configure again)
    sys.addaudithook(seen_in_child)
    listen = socket.socket.listen

    def watched_listen(self, *args):
        if Watch.item is not None:
            try:
                where = self.getsockname()
            except OSError:
                where = "?"
            Watch.seen.append(f"a server in the test's own process (a socket listening on {where})")
        return listen(self, *args)

    watched_listen.watched = True
    socket.socket.listen = watched_listen


@contextmanager
def watching(item):
    """Watch ``item`` while it runs; what it started is left in Watch.seen."""
    outer = Watch.item, Watch.seen
    Watch.item, Watch.seen = item, []
    try:
        yield
    finally:
        seen = Watch.seen
        Watch.item, Watch.seen = outer
        if seen:
            item.stash[SEEN] = item.stash.get(SEEN, []) + seen


SEEN = pytest.StashKey[list]()


def fail_for_what_it_started(item, phase: str) -> None:
    seen = item.stash.get(SEEN, [])
    if seen:
        item.stash[SEEN] = []
        lines = "\n  ".join(dict.fromkeys(seen))
        pytest.fail(f"{relative_id(item)} is one of `make check`'s tests (conftest.py: it starts no server and "
                    f"executes no lesson), but its {phase} started:\n  {lines}\nIf it must, leave it out of "
                    f"`make check`: add \"{relative_id(item)}\" (or its file) to LEFT_OUT_OF_CHECK in conftest.py "
                    f"with why, or use a fixture named in FIXTURES_THAT_START_SERVERS.", pytrace=False)


def watched_phase(phase: str):
    @pytest.hookimpl(wrapper=True)
    def hook(item, *args):
        if left_out_because(item) is not None:
            return (yield)
        with watching(item):
            result = yield
        fail_for_what_it_started(item, phase)
        return result

    return hook


pytest_runtest_setup = watched_phase("setup")
pytest_runtest_call = watched_phase("run")
pytest_runtest_teardown = watched_phase("teardown")


# What each test cost `make check`, in core-seconds: its process's CPU time and that of the children it waited for,
# setup to teardown. The teardown's report carries it, so that pytest-xdist brings it to the controller.
CORE_SECONDS = "core_seconds"
COST_FROM = pytest.StashKey[float]()


def core_seconds_now() -> float:
    if resource is None:
        return 0.0
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    item.stash[COST_FROM] = core_seconds_now()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if call.when == "teardown" and COST_FROM in item.stash:
        report.user_properties.append((CORE_SECONDS, core_seconds_now() - item.stash[COST_FROM]))
    return report


def over_budget(cost: dict[str, float], tests: dict[str, float] | None = None) -> list[str]:
    """What is over `make check`'s budgets, in words ([] when nothing is): ``cost`` is core-seconds by test file,
    ``tests`` by test."""
    problems = [f"{test}: {seconds:.1f} core-seconds (a test may take {CHECK_TEST_BUDGET_S:g})"
                for test, seconds in sorted((tests or {}).items(), key=lambda kv: -kv[1])
                if seconds > CHECK_TEST_BUDGET_S]
    problems += [f"{file}: {seconds:.1f} core-seconds (a file may take {CHECK_FILE_BUDGET_S:g})"
                 for file, seconds in sorted(cost.items(), key=lambda kv: -kv[1]) if seconds > CHECK_FILE_BUDGET_S]
    total = sum(cost.values())
    if total > CHECK_BUDGET_S:
        problems.append(f"all of make check's tests together: {total:.0f} core-seconds (they may take "
                        f"{CHECK_BUDGET_S:g})")
    return problems


class LessonCosts:
    """In a whole run (`make test`), on the controller: every test's cost, and at the end each lesson's tests' cost
    by kind (tests/support/lesson_costs.py) in _build/test-costs.md, which `make bench` prints. Written only when
    the run tested every lesson: a run of some files would understate them."""

    def __init__(self):
        self.costs: dict[str, float] = {}

    def pytest_runtest_logreport(self, report):
        if report.when == "teardown":
            seconds = dict(report.user_properties).get(CORE_SECONDS)
            if seconds is not None:
                self.costs[report.nodeid] = self.costs.get(report.nodeid, 0.0) + seconds

    def pytest_sessionfinish(self, session):
        notebooks = {nodeid.split("::")[0] for nodeid in self.costs if nodeid.startswith("notebooks/")}
        if len(notebooks) < len(lessons()):
            return
        from tests.support import lesson_costs  # lazy: only a whole run writes the table

        labels = {path.stem: exercise_labels(path) for path in lessons()}
        chapters = {stem: exercise_chapters(found) for stem, found in labels.items()}
        files = {path.name: lesson_of_lessons_file(path) for path in (ROOT / "tests" / "lessons").glob("test_*.py")}
        table = lesson_costs.markdown(*lesson_costs.cost_table(self.costs, labels, chapters, files),
                                      lesson_costs.costliest(self.costs))
        (ROOT / "_build").mkdir(exist_ok=True)
        (ROOT / "_build" / "test-costs.md").write_text(table, encoding="utf-8")


class CheckBudget:
    """In `make check` (--quick), on the controller: each test file's cost, and a failed run where one is over."""

    def __init__(self):
        self.cost: dict[str, float] = {}
        self.tests: dict[str, float] = {}
        self.problems: list[str] = []

    def pytest_runtest_logreport(self, report):
        if report.when == "teardown":
            seconds = dict(report.user_properties).get(CORE_SECONDS)
            if seconds is not None:
                file = report.nodeid.split("::")[0]
                self.cost[file] = self.cost.get(file, 0.0) + seconds
                self.tests[report.nodeid] = seconds

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        self.problems = over_budget(self.cost, self.tests) if exitstatus == 0 and session.testscollected else []
        if self.problems:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter):
        if not self.cost:
            return
        slowest = sorted(self.cost.items(), key=lambda kv: -kv[1])[:5]
        terminalreporter.write_sep("-", f"make check: {sum(self.cost.values()):.0f} core-seconds of tests; the "
                                        f"costliest files: " + ", ".join(f"{f} {s:.1f}" for f, s in slowest))
        if self.problems:
            terminalreporter.write_line("Over make check's budget (conftest.py's CHECK_TEST_BUDGET_S and the others): "
                                        "make it cheaper, or add it to LEFT_OUT_OF_CHECK as slow:", red=True)
            for problem in self.problems:
                terminalreporter.write_line(f"  {problem}", red=True)

