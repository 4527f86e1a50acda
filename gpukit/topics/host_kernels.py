"""A CUDA kernel run on the CPU, one thread after another: a stand-in for ``cupy.RawKernel`` where there is no GPU.

A simple kernel (each thread works on its own elements: no shared memory, no ``__syncthreads``, no warp
functions) gives the same result whatever order its threads run in, so the host's C++ compiler can run it.
:class:`HostKernel` compiles the kernel's source with CUDA's names defined (``threadIdx``, ``blockIdx``,
``blockDim``, ``gridDim``, ``__global__``, ...), calls it once for every thread of the grid, and is called as
CuPy's ``RawKernel`` is, ``kernel(grid, block, args)``, with NumPy arrays where CuPy takes CuPy arrays.

Arguments reach the kernel as they reach a GPU through CuPy: an array as a pointer to its first element, a
NumPy scalar as its bytes, a Python ``int`` as an 8-byte ``long long`` and a Python ``float`` as an 8-byte
``double`` (CuPy's documentation, "Kernel arguments"); the kernel then reads as many bytes as its parameter
has, as the CUDA driver does. So a Python float given to a ``float`` parameter arrives as garbage here too.

Each launch runs in a child process, with guard zones around every array: a write outside an array (a
missing or off-by-one bounds check) is reported in :attr:`HostKernel.outside_writes` instead of corrupting
memory, and a kernel that crashes its process raises :class:`HostLaunchError` instead of killing the
notebook's kernel. What this cannot show: speed, races between threads, and anything a GPU does differently
from a CPU (its memory model, its floating-point contractions).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from numbers import Integral
from pathlib import Path

import numpy as np

# CUDA's names for a kernel compiled by a host C++ compiler. The kernel's source follows this prelude.
_PRELUDE = r"""
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
struct uint3 { unsigned int x, y, z; };
struct dim3 { unsigned int x, y, z; };
static uint3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;
static const int warpSize = 32;
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __ldg(p) (*(p))
#define __syncthreads() static_assert(false, "gpukit runs a kernel's threads one after another on the CPU, " \
                                      "so it cannot run __syncthreads")
#define __shared__ static_assert(false, "gpukit runs a kernel's threads one after another on the CPU, " \
                                 "so it cannot run a kernel that uses __shared__ memory"); static
template <typename T> T atomicAdd(T* address, T value) { T old = *address; *address += value; return old; }
using std::max;
using std::min;
"""

# After the kernel: a launcher that runs every thread of the grid, and the kernel's parameter types.
_LAUNCHER = r"""
namespace gpukit_host {
template <typename T> struct type_name { static std::string get() { return "?"; } };
#define GPUKIT_TYPE_NAME(T) template <> struct type_name<T> { static std::string get() { return #T; } };
GPUKIT_TYPE_NAME(bool) GPUKIT_TYPE_NAME(char) GPUKIT_TYPE_NAME(signed char) GPUKIT_TYPE_NAME(unsigned char)
GPUKIT_TYPE_NAME(short) GPUKIT_TYPE_NAME(unsigned short) GPUKIT_TYPE_NAME(int) GPUKIT_TYPE_NAME(unsigned int)
GPUKIT_TYPE_NAME(long) GPUKIT_TYPE_NAME(unsigned long) GPUKIT_TYPE_NAME(long long)
GPUKIT_TYPE_NAME(unsigned long long) GPUKIT_TYPE_NAME(float) GPUKIT_TYPE_NAME(double) GPUKIT_TYPE_NAME(void)
template <typename T> struct type_name<const T> { static std::string get() { return "const " + type_name<T>::get(); } };
template <typename T> struct type_name<T*> { static std::string get() { return type_name<T>::get() + "*"; } };

template <typename... P> std::string signature(void (*)(P...)) {
  std::string names[] = {type_name<P>::get()..., ""};
  std::string joined;
  for (std::size_t k = 0; k < sizeof...(P); ++k) joined += (k ? ", " : "") + names[k];
  return joined;
}

// As the CUDA driver does: copy sizeof(parameter) bytes from where each argument is stored.
template <typename... P, std::size_t... I>
void run_one_thread(void (*kernel)(P...), void** args, std::index_sequence<I...>) {
  std::tuple<std::remove_cv_t<P>...> values;
  (std::memcpy(static_cast<void*>(&std::get<I>(values)), args[I], sizeof(std::remove_cv_t<P>)), ...);
  kernel(std::get<I>(values)...);
}

template <typename... P>
int launch(void (*kernel)(P...), const unsigned* grid, const unsigned* block, void** args, int n_args) {
  if (n_args != static_cast<int>(sizeof...(P))) return static_cast<int>(sizeof...(P));
  gridDim = {grid[0], grid[1], grid[2]};
  blockDim = {block[0], block[1], block[2]};
  for (unsigned bz = 0; bz < grid[2]; ++bz) for (unsigned by = 0; by < grid[1]; ++by)
  for (unsigned bx = 0; bx < grid[0]; ++bx) for (unsigned tz = 0; tz < block[2]; ++tz)
  for (unsigned ty = 0; ty < block[1]; ++ty) for (unsigned tx = 0; tx < block[0]; ++tx) {
    blockIdx = {bx, by, bz};
    threadIdx = {tx, ty, tz};
    run_one_thread(kernel, args, std::index_sequence_for<P...>{});
  }
  return -1;
}
}  // namespace gpukit_host

extern "C" int gpukit_host_launch(const unsigned* grid, const unsigned* block, void** args, int n_args) {
  return gpukit_host::launch(KERNEL_NAME, grid, block, args, n_args);
}
extern "C" const char* gpukit_host_signature() {
  static const std::string found = gpukit_host::signature(KERNEL_NAME);
  return found.c_str();
}
"""

# The C types a parameter may have, with the NumPy dtype of the same bytes.
C_TYPES = {
    "bool": np.dtype(np.bool_), "char": np.dtype(np.int8), "signed char": np.dtype(np.int8),
    "unsigned char": np.dtype(np.uint8), "short": np.dtype(np.int16), "unsigned short": np.dtype(np.uint16),
    "int": np.dtype(np.int32), "unsigned int": np.dtype(np.uint32),
    "long": np.dtype(f"i{ctypes.sizeof(ctypes.c_long)}"),
    "unsigned long": np.dtype(f"u{ctypes.sizeof(ctypes.c_ulong)}"),
    "long long": np.dtype(np.int64), "unsigned long long": np.dtype(np.uint64),
    "float": np.dtype(np.float32), "double": np.dtype(np.float64),
}
GUARD_BYTES = 1 << 16  # on each side of every array
MOST_THREADS = 1 << 24  # one after another: more would take minutes
MOST_THREADS_PER_BLOCK = 1024  # CUDA's limit; a bigger block fails to launch on a GPU


class HostCompileError(RuntimeError):
    """The host's C++ compiler rejected the kernel's source (the message is the compiler's)."""


class HostLaunchError(RuntimeError):
    """The kernel crashed the child process that ran it (it read or wrote far outside its arrays)."""


@dataclass(frozen=True)
class Param:
    """One parameter of a kernel, as the compiler names its type: ``"const float*"``, ``"int"``."""

    ctype: str

    @property
    def is_pointer(self) -> bool:
        return self.ctype.endswith("*")

    @property
    def base(self) -> str:
        """The type without ``const`` and ``*``: ``"float"`` for ``"const float*"``."""
        return self.ctype.replace("const ", "").rstrip("*").strip()

    @property
    def dtype(self) -> np.dtype | None:
        return C_TYPES.get(self.base)


@dataclass(frozen=True)
class OutsideWrite:
    """Elements a launch wrote just before the start or past the end of one array argument."""

    argument: int
    param: str
    before: int
    after: int

    def __str__(self) -> str:
        where = [f"{self.after} element(s) past the end"] if self.after else []
        where += [f"{self.before} element(s) before the start"] if self.before else []
        return f"argument {self.argument} ({self.param}): wrote {' and '.join(where)}"


def cxx_compiler() -> str | None:
    """The host's C++ compiler (``$CXX``, else ``c++``, ``g++`` or ``clang++`` on ``PATH``), or ``None``."""
    for name in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        found = shutil.which(name) if name else None
        if found:
            return found
    return None


_BUILDS: list[tempfile.TemporaryDirectory] = []  # this process's compiled kernels, made at the first compile


def _build_folder() -> Path:
    if not _BUILDS:
        _BUILDS.append(tempfile.TemporaryDirectory(prefix="gpukit-host-kernels-"))
    return Path(_BUILDS[0].name)


def _compile(source: str, name: str) -> Path:
    compiler = cxx_compiler()
    if compiler is None:
        raise FileNotFoundError("no C++ compiler (c++, g++ or clang++) was found, so the kernel cannot run on "
                                "the CPU here")
    text = (f"{_PRELUDE}\n#line 1 \"kernel.cu\"\n{source}\n#line 1 \"gpukit-launcher\"\n"
            f"#define KERNEL_NAME {name}\n{_LAUNCHER}")
    digest = hashlib.sha256(f"{compiler}\n{text}".encode()).hexdigest()[:20]
    library = _build_folder() / f"{name}-{digest}.so"
    if library.is_file():
        return library
    source_file = library.with_suffix(".cpp")
    source_file.write_text(text, encoding="utf-8")
    done = subprocess.run([compiler, "-std=c++17", "-O1", "-w", "-shared", "-fPIC", str(source_file), "-o",
                           str(library)], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        # The kernel's own lines are named kernel.cu (the #line directive); the rest is gpukit's prelude.
        lines = [line.replace(str(source_file), "gpukit-prelude") for line in done.stderr.splitlines()
                 if "error" in line.lower()]
        raise HostCompileError("\n".join(lines[:8]) or done.stderr.strip()[-2000:])
    return library


def _dim(value, what: str) -> tuple[int, int, int]:
    """A grid or block as CuPy reads it: a tuple of 1 to 3 ints, padded with 1s, each at least 1."""
    if not isinstance(value, tuple) or not 1 <= len(value) <= 3 or not all(
            isinstance(v, Integral) and not isinstance(v, bool) for v in value):
        example = "(blocks,)" if what == "grid" else "(threads,)"
        raise TypeError(f"{what} must be a tuple of 1 to 3 whole numbers, such as {example}, not {value!r}")
    return tuple(max(1, int(v)) for v in value) + (1,) * (3 - len(value))  # CuPy turns 0 into 1


def _scalar_bytes(value) -> tuple[np.ndarray, str]:
    """The bytes CuPy passes for a scalar argument, and how to name what was given."""
    if isinstance(value, np.ndarray):  # a NumPy array of size one is passed by value
        return np.ascontiguousarray(value).reshape(1), f"a NumPy {value.dtype} array of size one"
    if isinstance(value, np.generic):
        return np.array([value]), f"a NumPy {value.dtype}"
    if isinstance(value, bool):
        return np.array([value], dtype=np.bool_), "a Python bool"
    if isinstance(value, int):
        dtype = np.uint64 if value >= 1 << 63 else np.int64
        return np.array([value], dtype=dtype), "a Python int (CuPy passes it as an 8-byte long long)"
    if isinstance(value, float):
        return np.array([value], dtype=np.float64), "a Python float (CuPy passes it as an 8-byte double)"
    raise TypeError(f"CuPy cannot pass {type(value).__name__} {value!r} to a kernel")


_CHILD = r"""
import ctypes, json, sys
import numpy as np

spec = json.loads(sys.argv[1])
stored = np.load(spec["arrays"])
guard = spec["guard"]
library = ctypes.CDLL(spec["library"])
keep, buffers, report = [], {}, {}
pointers = (ctypes.c_void_p * len(spec["args"]))()
for k, arg in enumerate(spec["args"]):
    if arg["kind"] == "array":
        data = stored[f"a{k}"].view(np.uint8).ravel()
        full = np.full(2 * guard + data.size, 0xA5, dtype=np.uint8)
        full[guard:guard + data.size] = data
        slot = np.array([full.ctypes.data + guard], dtype=np.uintp)
        buffers[k] = full
    else:
        raw = stored[f"a{k}"].view(np.uint8).ravel()
        slot = np.full(raw.size + 16, 0xAB, dtype=np.uint8)  # what a bigger parameter would read beyond
        slot[:raw.size] = raw
    keep.append(slot)
    pointers[k] = slot.ctypes.data
grid = (ctypes.c_uint * 3)(*spec["grid"])
block = (ctypes.c_uint * 3)(*spec["block"])
library.gpukit_host_launch(grid, block, pointers, len(spec["args"]))
results = {}
for k, full in buffers.items():
    size = spec["args"][k]["nbytes"]
    item = spec["args"][k]["itemsize"]
    before = (full[:guard] != 0xA5).reshape(-1, item).any(axis=1)
    after = (full[guard + size:] != 0xA5).reshape(-1, item).any(axis=1)
    report[k] = [int(before.sum()), int(after.sum())]
    results[f"a{k}"] = full[guard:guard + size]
np.savez(spec["out"], **results)
print(json.dumps(report))
"""


class HostKernel:
    """A CUDA kernel compiled for the CPU and called as ``cupy.RawKernel`` is: ``kernel(grid, block, args)``.

    ``HostKernel(source, name)`` compiles ``source`` with the host's C++ compiler (raising
    :class:`HostCompileError` with the compiler's message, or ``LookupError`` where the kernel ``name`` is not
    declared ``extern "C"``, which CuPy needs to find it). A call runs every thread of the grid, one after
    another, on NumPy arrays, and writes the results back into them; :attr:`outside_writes` then lists the
    writes that fell outside an array, and :attr:`notes` the scalar arguments whose size or kind differed
    from their parameter's.
    """

    def __init__(self, source: str, name: str):
        if not isinstance(source, str) or "__global__" not in source:
            raise ValueError("source must be the text of a CUDA kernel (with __global__)")
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"name must be the kernel's name, not {name!r}")
        self.source, self.name = source, name
        self.library = _compile(source, name)
        loaded = ctypes.CDLL(str(self.library))
        signature = loaded.gpukit_host_signature
        signature.restype = ctypes.c_char_p
        text = signature().decode()
        self.params = [Param(p.strip()) for p in text.split(",")] if text.strip() else []
        try:
            getattr(loaded, name)
        except AttributeError:
            raise LookupError(f"the kernel {name} is not declared extern \"C\": CuPy finds a kernel by its plain "
                              "name, which C++ changes (mangles) unless the kernel is extern \"C\"") from None
        self.outside_writes: list[OutsideWrite] = []
        self.notes: list[str] = []

    @staticmethod
    def can_compile() -> bool:
        """Whether this machine has a C++ compiler to build host kernels with."""
        return cxx_compiler() is not None

    def __repr__(self) -> str:
        return f"HostKernel({self.name}({', '.join(p.ctype for p in self.params)}))"

    def check_arguments(self, args) -> list[str]:
        """Refuse what would crash the CPU (or garble a GPU's work): the wrong number of arguments, an array
        where a value goes or the reverse, an array whose dtype is not its pointer's type. Returns notes on
        scalars whose size or kind differs from their parameter's (they run, as on a GPU)."""
        return check_kernel_arguments(self.params, args, array_type=np.ndarray, library="NumPy")

    def __call__(self, grid, block, args, *, shared_mem: int = 0) -> None:
        grid, block = _dim(grid, "grid"), _dim(block, "block")
        if np.prod(block) > MOST_THREADS_PER_BLOCK:
            raise ValueError(f"a block of {np.prod(block)} threads is more than CUDA's {MOST_THREADS_PER_BLOCK}: "
                             "on a GPU this launch fails (invalid argument)")
        if np.prod(grid) * np.prod(block) > MOST_THREADS:
            raise ValueError(f"{np.prod(grid) * np.prod(block):,} threads are more than the CPU stand-in runs "
                             f"({MOST_THREADS:,})")
        if shared_mem:
            raise ValueError("the CPU stand-in runs no kernel that uses shared memory")
        if not isinstance(args, tuple | list):
            raise TypeError(f"args must be a tuple of the kernel's arguments, not {type(args).__name__}")
        self.notes = self.check_arguments(args)
        self.outside_writes = []
        with tempfile.TemporaryDirectory(prefix="gpukit-host-launch-") as folder:
            arrays, described = {}, []
            for k, (param, arg) in enumerate(zip(self.params, args, strict=True)):
                if param.is_pointer:
                    arrays[f"a{k}"] = np.ascontiguousarray(arg)
                    described.append({"kind": "array", "nbytes": arg.nbytes, "itemsize": arg.itemsize})
                else:
                    arrays[f"a{k}"] = _scalar_bytes(arg)[0]
                    described.append({"kind": "scalar"})
            stored, out = Path(folder) / "in.npz", Path(folder) / "out.npz"
            np.savez(stored, **arrays)
            spec = {"library": str(self.library), "arrays": str(stored), "out": str(out), "guard": GUARD_BYTES,
                    "grid": grid, "block": block, "args": described}
            done = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(spec)], capture_output=True,
                                  text=True, timeout=300)
            if done.returncode != 0:
                raise HostLaunchError(f"the kernel {self.name} crashed the process that ran it (exit status "
                                      f"{done.returncode}): it read or wrote far outside its arrays")
            report = json.loads(done.stdout.strip().splitlines()[-1])
            with np.load(out) as results:
                for key, (before, after) in report.items():
                    k = int(key)
                    target = args[k]
                    target.reshape(-1).view(np.uint8)[:] = results[f"a{k}"]
                    if before or after:
                        self.outside_writes.append(OutsideWrite(k, self.params[k].ctype, before, after))


def check_kernel_arguments(params: list[Param], args, *, array_type, library: str) -> list[str]:
    """What :meth:`HostKernel.check_arguments` does, for any array type (``cupy.ndarray`` on a GPU)."""
    if len(args) != len(params):
        raise TypeError(f"the kernel takes {len(params)} arguments ({', '.join(p.ctype for p in params)}), "
                        f"got {len(args)}")
    notes = []
    for k, (param, arg) in enumerate(zip(params, args, strict=True)):
        if param.is_pointer:
            if not isinstance(arg, array_type):
                raise TypeError(f"argument {k} goes to the pointer {param.ctype}: pass a {library} array, not "
                                f"{type(arg).__name__}")
            if param.dtype is not None and arg.dtype != param.dtype:
                raise TypeError(f"argument {k} is a {arg.dtype} array, but the kernel reads it as {param.ctype} "
                                f"({param.dtype} elements): convert it with .astype(np.{param.dtype})")
            if not arg.flags.c_contiguous:
                raise TypeError(f"argument {k} is not contiguous: a raw kernel ignores strides, so pass a "
                                "contiguous array")
            continue
        if isinstance(arg, array_type):
            raise TypeError(f"argument {k} is a {library} array, which reaches the kernel as a pointer, but the "
                            f"kernel's parameter {k} is the value {param.ctype}: pass a NumPy scalar of that C type "
                            f"(dtype {param.dtype or 'int32'})")
        data, given = _scalar_bytes(arg)
        if param.dtype is None:
            continue
        if data.itemsize != param.dtype.itemsize or data.dtype.kind != param.dtype.kind:
            notes.append(f"argument {k} is {given}, but the kernel's parameter {k} is the "
                         f"{param.dtype.itemsize}-byte {param.ctype}, so the kernel reads its first "
                         f"{param.dtype.itemsize} bytes as a {param.ctype}: pass a NumPy scalar of the parameter's "
                         f"type (dtype {param.dtype})")
    return notes
