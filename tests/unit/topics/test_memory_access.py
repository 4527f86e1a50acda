"""Counting a kernel's memory accesses on Numba's CUDA simulator (gpukit.topics.memory_access), proven on kernels
whose counts are known: a coalesced float32 copy makes requests of 4 sectors, a stride-32 copy of 32, a transpose
through an unpadded 32 × 32 tile has 32-way bank conflicts on its column read and the padded tile none; a missing
cuda.syncthreads() is found on every run; the simulator is left as it was; and a kernel compiled for a GPU (numba's
real CUDA target) is counted through its Python function."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from gpukit.topics import memory_access
from gpukit.topics.memory_access import NO_NUMBA, count_accesses
from gpukit.topics.simulators import use_cuda_simulator
from tests.support.booktoc import ROOT


@pytest.fixture(scope="module")
def k():
    use_cuda_simulator()  # before numba is first imported, or it takes no effect
    pytest.importorskip("numba")
    from tests.support import numba_kernels_for_performance

    return numba_kernels_for_performance


def test_a_coalesced_float32_copy_touches_4_sectors_per_request(k):
    x = np.arange(256, dtype=np.float32)
    out = np.zeros_like(x)
    counts = count_accesses(k.copy, 2, 128, x, out)
    assert np.array_equal(out, x)  # the arrays are updated in place, as a launch would
    assert counts.names == ("x", "out")
    assert counts.loads == {"x": 256, "out": 0} and counts.stores == {"x": 0, "out": 256}
    assert counts.reads_per_element["x"] == 1.0
    assert counts.requests == {"x": 8, "out": 8}  # 256 threads: 8 warps, one load and one store each
    assert counts.sectors_per_request == {"x": 4.0, "out": 4.0}  # 32 lanes × 4 bytes = 128 bytes = 4 sectors


def test_float64_needs_8_sectors_and_a_broadcast_1(k):
    x = np.arange(64, dtype=np.float64)
    out = np.zeros_like(x)
    assert count_accesses(k.copy, 1, 64, x, out).sectors_per_request["x"] == 8.0
    broadcast = count_accesses(k.broadcast, 1, 64, x, out)
    assert broadcast.sectors_per_request["x"] == 1.0 and broadcast.loads["x"] == 64


def test_a_stride_32_copy_touches_32_sectors_per_request(k):
    x = np.arange(32 * 256, dtype=np.float32)
    out = np.zeros_like(x)
    counts = count_accesses(k.copy_stride_32, 2, 128, x, out)
    assert counts.loads["x"] == 256 and counts.reads_per_element["x"] == 1 / 32
    assert counts.sectors_per_request["x"] == 32.0  # every lane in its own sector
    assert counts.ideal_sectors_per_request["x"] == 4.0
    assert np.array_equal(out[::32], x[::32]) and not out[1::32].any()


def test_a_load_and_a_store_of_one_element_are_both_counted(k):
    x = np.zeros(100, dtype=np.float32)
    counts = count_accesses(k.increment, 1, 128, x)
    assert (x == 1).all()
    assert counts.loads["x"] == counts.stores["x"] == 100
    assert counts.requests["x"] == 8  # 4 warps have work (100 threads), each loading and storing once


def test_atomics_are_counted_apart_from_loads_and_stores(k):
    x = np.ones(200, dtype=np.float32)
    total = np.zeros(1, dtype=np.float32)
    counts = count_accesses(k.count_with_atomics, 2, 128, x, total)
    assert total[0] == 200
    assert counts.atomics == {"x": 0, "total": 200}
    assert counts.loads["total"] == counts.stores["total"] == 0


def _transpose(k, kernel, rows=32, cols=64):
    """``kernel`` on a rows × cols matrix (two tiles, not square: swapped sides would show), checked; its counts."""
    inp = np.random.default_rng(1).standard_normal((rows, cols)).astype(np.float32)
    out = np.zeros((cols, rows), dtype=np.float32)
    counts = count_accesses(kernel, (cols // 32, rows // 32), (k.TILE, k.ROWS), inp, out)
    assert np.array_equal(out, inp.T)
    return counts


@pytest.fixture(scope="module")
def tiled(k):
    """The unpadded tile's counts, which two tests read (one launch for both)."""
    return _transpose(k, k.transpose_tiled)


def test_the_unpadded_tiles_column_read_has_32_way_bank_conflicts(tiled):
    counts = tiled
    assert counts.shared_names == ("tile",)
    column_read, row_write = counts.row("tile", "load", "shared"), counts.row("tile", "store", "shared")
    assert column_read.bank_conflict_ways == 32.0 and column_read.worst_bank_conflict_ways == 32
    assert row_write.bank_conflict_ways == 1.0
    assert counts.bank_conflict_ways == 16.5 and counts.shared_requests == 128  # the mean of 64 × 1 and 64 × 32
    assert counts.sectors_per_request == {"inp": 4.0, "out": 4.0}  # both coalesced through the tile
    assert counts.reads_per_element["inp"] == 1.0 and counts.race_count == 0


def test_the_padded_tile_has_no_bank_conflict(k):
    counts = _transpose(k, k.transpose_padded)
    assert counts.bank_conflict_ways == 1.0 and counts.worst_bank_conflict_ways == 1
    assert counts.sectors_per_request == {"inp": 4.0, "out": 4.0}


def test_the_naive_transposes_stores_are_strided(k):
    counts = _transpose(k, k.transpose_naive)
    assert counts.sectors_per_request == {"inp": 4.0, "out": 32.0}
    assert counts.shared_requests == 0 and counts.bank_conflict_ways == 0.0


def test_partial_warps_at_the_edges_touch_fewer_sectors(k):
    inp = np.ones((36, 36), dtype=np.float32)
    out = np.zeros_like(inp)
    counts = count_accesses(k.transpose_padded, (2, 2), (k.TILE, k.ROWS), inp, out)
    assert (out == 1).all()
    # Rows of 144 bytes: a full warp's 128 bytes start on a sector in even rows (4 sectors) and half-way into one in
    # odd rows (5); the 4 columns past the first tile make warps of 4 lanes, 16 bytes in one sector. 36 requests of
    # each: (18 × 4 + 18 × 5 + 36 × 1) / 72 sectors per request, where (36 × 4 + 36 × 1) / 72 would do.
    assert counts.requests == {"inp": 72, "out": 72}
    assert counts.sectors_per_request == {"inp": 2.75, "out": 2.75}
    assert counts.ideal_sectors_per_request == {"inp": 2.5, "out": 2.5}


def test_a_missing_barrier_is_a_race_on_every_run(k, monkeypatch):
    for interval in (0.0002, 0.005):  # however the Python threads happen to interleave (count_accesses sets it)
        monkeypatch.setattr(memory_access, "SWITCH_INTERVAL", interval)
        x = np.ones(200, dtype=np.float32)  # two blocks, the second partly past the end
        racy = count_accesses(k.block_sums_without_barrier, 2, k.THREADS, x, np.zeros(2, np.float32))
        out = np.zeros(2, np.float32)
        right = count_accesses(k.block_sums, 2, k.THREADS, x, out)
        assert racy.race_count > 0 and "no cuda.syncthreads() between" in str(racy.races[0])
        assert "partial[" in str(racy.races[0])
        assert right.race_count == 0 and out.tolist() == [128, 72]
    unsynced = count_accesses(k.transpose_padded_without_barrier, 1, (k.TILE, k.ROWS),
                              np.ones((32, 32), np.float32), np.zeros((32, 32), np.float32))
    assert unsynced.race_count > 0 and "tile[" in unsynced.table()


def test_threads_of_a_block_that_pass_different_barriers_are_found(k):
    x = np.ones(200, dtype=np.float32)
    right = count_accesses(k.block_sums, 2, k.THREADS, x, np.zeros(2, np.float32))
    assert right.divergent_barrier is None
    # A barrier inside `if t < step:`: the simulator runs it to the right sums; on a GPU it is undefined.
    out = np.zeros(2, np.float32)
    skipped = count_accesses(k.block_sums_barrier_in_the_branch, 2, k.THREADS, x, out)
    assert out.tolist() == [128, 72] and skipped.race_count == 0
    barrier = skipped.divergent_barrier
    assert barrier.block == (0, 0, 0) and barrier.ahead[:2] == (0, 8) and barrier.behind == (1, 7, None)
    assert "thread 0 passed cuda.syncthreads() 8 times, but thread 1 only 7" in str(barrier)
    assert "threads of a block passed different barriers" in skipped.table()
    two_lines = count_accesses(k.barriers_on_two_lines, 1, 32, np.zeros(32, np.float32)).divergent_barrier
    (_, _, first), (_, _, second) = two_lines.ahead, two_lines.behind
    assert first != second and f"at line {first} where thread" in str(two_lines)
    # Threads that return early pass fewer barriers: the second block of 200 values in blocks of 128.
    early = count_accesses(k.return_before_a_barrier, 2, 128, x, np.zeros(200, np.float32)).divergent_barrier
    assert early.block == (1, 0, 0) and early.ahead[:2] == (0, 1) and early.behind == (72, 0, None)


def test_shared_memory_starts_out_holding_garbage(k):
    out = np.zeros(32, dtype=np.float32)
    count_accesses(k.read_unwritten_shared, 1, 32, out)
    assert np.isnan(out).all()  # not the zeros a kernel could wrongly rely on


def test_the_table_has_a_row_per_array_and_access(tiled):
    counts = tiled
    table = counts.table()
    assert str(counts) == table
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["array", "memory", "access"]
    assert [line.split()[:3] for line in lines[1:]] == [["inp", "global", "load"], ["out", "global", "store"],
                                                        ["tile", "shared", "load"], ["tile", "shared", "store"]]
    assert "32.0" in lines[3] and "4.0 (best 4.0)" in lines[1]


def test_the_simulator_is_left_as_it_was_also_after_an_error(k):
    from numba import cuda
    from numba.cuda.simulator import kernel

    original, interval = kernel.FakeCUDAModule, sys.getswitchinterval()
    assert interval != memory_access.SWITCH_INTERVAL  # Python's own, which a launch must leave as it found it
    count_accesses(k.copy, 1, 32, np.ones(32, np.float32), np.zeros(32, np.float32))
    assert kernel.FakeCUDAModule is original and k.cuda is cuda and sys.getswitchinterval() == interval
    with pytest.raises(IndexError, match="out of bounds"):
        count_accesses(k.transpose_padded_without_guard, (2, 2), (k.TILE, k.ROWS), np.ones((40, 40), np.float32),
                       np.zeros((40, 40), np.float32))
    assert kernel.FakeCUDAModule is original and k.cuda is cuda and sys.getswitchinterval() == interval
    # and the kernel still launches as a plain simulated kernel would
    x = np.arange(32, dtype=np.float32)
    out = np.zeros_like(x)
    if type(k.copy).__name__ == "FakeCUDAKernel":
        k.copy[1, 32](x, out)
        assert np.array_equal(out, x)


class CUDADispatcher:
    """Stands for a kernel numba compiled for a GPU: the real target's class name, its Python function, its options."""

    def __init__(self, kernel, device=False):
        self.py_func = getattr(kernel, "py_func", kernel)
        self.targetoptions = {"device": device}

    def __getitem__(self, configuration):
        raise AssertionError("a GPU launch: count_accesses must run the Python function on the simulator instead")


def test_a_kernel_compiled_for_a_gpu_runs_its_python_function_on_the_simulator(k):
    inp = np.random.default_rng(2).standard_normal((40, 50)).astype(np.float32)
    out = np.zeros((50, 40), dtype=np.float32)
    counts = count_accesses(CUDADispatcher(k.transpose_padded), (2, 2), (k.TILE, k.ROWS), inp, out)
    assert np.array_equal(out, inp.T) and counts.bank_conflict_ways == 1.0


CHILD = """
import json, sys
import numpy as np
from numba import cuda
from gpukit.topics.memory_access import count_accesses
from tests.support import numba_kernels_for_performance as k

inp = np.random.default_rng(3).standard_normal((32, 64)).astype(np.float32)
out = np.zeros((64, 32), dtype=np.float32)
tiled = count_accesses(k.transpose_tiled, (2, 1), (k.TILE, k.ROWS), inp, out)
x = np.arange(100, dtype=np.float32)
doubled = np.zeros_like(x)
count_accesses(k.double_through_a_device_function, 1, 128, x, doubled)
print(json.dumps({"kind": type(k.transpose_tiled).__name__, "device function": type(k.twice).__name__,
                  "transposed": bool((out == inp.T).all()), "ways": tiled.row("tile", "load").bank_conflict_ways,
                  "sectors": tiled.sectors_per_request, "doubled": bool((doubled == 2 * x).all()),
                  "restored": k.cuda is cuda and type(k.twice).__name__ == "CUDADispatcher"}))
"""


def test_on_numbas_real_cuda_target_the_kernel_is_counted_on_the_simulator(k):
    # A child Python where numba's CUDA target is the real one, as on a GPU node, with the GPU hidden: the kernels
    # are CUDADispatchers, compiled lazily for a GPU; count_accesses must never launch them there.
    env = {name: value for name, value in os.environ.items()
           if name != "NUMBA_ENABLE_CUDASIM" and not name.startswith("PYTEST_")}
    env.update(CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {"kind": "CUDADispatcher", "device function": "CUDADispatcher", "transposed": True,
                     "ways": 32.0, "sectors": {"inp": 4.0, "out": 4.0}, "doubled": True, "restored": True}


def test_what_is_not_a_kernel_is_refused(k):
    with pytest.raises(TypeError, match="expected a Numba CUDA kernel"):
        count_accesses(lambda x: None, 1, 32, np.zeros(4))
    with pytest.raises(TypeError, match="device function"):
        count_accesses(CUDADispatcher(k.twice, device=True), 1, 32, 1.0)
    with pytest.raises(ValueError, match="threads must be"):
        count_accesses(k.copy, 1, (32, 0), np.zeros(4), np.zeros(4))


def test_a_device_array_is_refused_with_what_to_pass(k):
    class DeviceNDArray:
        def copy_to_host(self):
            return np.zeros(4)

    with pytest.raises(TypeError, match="pass NumPy arrays"):
        count_accesses(k.copy, 1, 32, DeviceNDArray(), np.zeros(4))


def test_without_numba_it_says_what_to_install(k, monkeypatch):
    monkeypatch.setitem(sys.modules, "numba", None)  # import numba now fails
    with pytest.raises(ModuleNotFoundError, match="Numba is not installed: pip install numba-cuda"):
        count_accesses(CUDADispatcher(k.copy), 1, 32, np.zeros(4), np.zeros(4))
    assert NO_NUMBA == "Numba is not installed: pip install numba-cuda"


@pytest.fixture(scope="module")
def shuffles():
    use_cuda_simulator()
    pytest.importorskip("numba")
    from tests.support import numba_shuffle_kernels

    return numba_shuffle_kernels


def test_a_shuffle_takes_the_value_of_the_lane_delta_above_and_keeps_its_own_past_the_end(shuffles):
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    counts = count_accesses(shuffles.lanes_read_down, 1, 64, x, out)
    want = np.concatenate([np.r_[w + 3:w + 32, w + 29:w + 32] for w in (0, 32)]).astype(np.float32)
    assert out.tolist() == want.tolist()  # each warp on its own: lane 31 never reads the next warp's lane 2
    assert counts.shuffles == 2 and "2 warp shuffles" in counts.table()
    assert counts.sectors_per_request["x"] == 4  # the shuffle is no memory access: the load stays coalesced


def test_a_reduction_whose_last_step_is_warp_shuffles_sums_each_block(shuffles):
    x = np.random.default_rng(1).standard_normal(200).astype(np.float32)
    out = np.zeros(2, np.float32)
    counts = count_accesses(shuffles.block_sums_shuffled, 2, shuffles.THREADS, x, out)
    want = [x[:128].sum(dtype=np.float64), x[128:].sum(dtype=np.float64)]
    assert np.allclose(out, want, rtol=1e-5, atol=1e-5)
    assert counts.shuffles == 2 * 5  # one warp a block, offsets 16, 8, 4, 2, 1
    assert counts.race_count == 0 and counts.divergent_barrier is None
    assert counts.stores["out"] == 2


def test_a_shuffle_some_lanes_skip_is_an_error_not_a_hang(shuffles, monkeypatch):
    monkeypatch.setattr(memory_access, "SHUFFLE_WAIT_S", 0.5)
    x = np.ones(32, np.float32)
    with pytest.raises(RuntimeError, match="every lane named in the mask must call it"):
        count_accesses(shuffles.shuffle_on_half_a_warp, 1, 32, x, np.zeros(32, np.float32))
