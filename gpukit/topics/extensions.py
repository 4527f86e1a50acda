"""Building PyTorch C++ and CUDA extensions inside a lesson: what the machine has for it, where the builds
are kept, and how long a build took.

``torch.utils.cpp_extension.load_inline`` compiles C++ (and CUDA) source strings into a Python module. It
needs a C++ compiler, the ``ninja`` build tool on ``PATH`` and Python's headers; a CUDA extension also needs
a CUDA build of PyTorch, a CUDA device and the CUDA toolkit (nvcc) that PyTorch finds through ``CUDA_HOME``,
of the CUDA major PyTorch was built for. ``load_inline`` checks neither that ``CUDA_HOME`` holds ``bin/nvcc``
nor nvcc's version (only ``setup.py`` builds through ``BuildExtension`` compare it with
``torch.version.cuda``): a mismatch shows up as a compiler or loader error deep in the build.

- :func:`build_tools` looks for all of these and says, for each kind of extension, why it cannot be built
  (or that it can), nvcc's release against ``torch.version.cuda`` included (:func:`nvcc_release`);
- :func:`extension_dir` is where one extension is built: ``<repo>/_build/cache/torch_extensions/<name>`` (a plain
  private folder instead where that path has spaces, :func:`gpukit.base.paths.build_dir`).
  PyTorch rebuilds only when the sources or flags change, so a second run of a notebook loads the module
  from there instead of compiling again;
- :func:`timed_build` times a build and tells a compilation from a load out of that cache;
- :func:`ptx_excerpt` picks the telling lines of one kernel out of nvcc's PTX, and :func:`ptx_listing` compiles a
  kernel's source to PTX with nvcc (no GPU needed) and offers its kernels' names and those excerpts.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from gpukit.base import nvcc as cuda_compiler
from gpukit.base.paths import build_dir, project_root
from gpukit.core.device import cuda_available

STATE_NAME = "torch_extensions"
# Files a finished build leaves: the extension module itself.
_LIBRARY_SUFFIXES = (".so", ".pyd", ".dylib")
# A build here takes well under this; a lock file older than it was left by a build that was interrupted.
STALE_LOCK_SECONDS = 15 * 60
# The lines of a kernel's PTX worth reading first: where the thread is, the bounds guard, memory, the maths.
PTX_HIGHLIGHTS = ("%ctaid", "%ntid", "%tid", "setp.", "bra", "ld.global", "st.global", "ex2.", "rcp.",
                  "div.", "ret;")
# `nvcc --version` ends "Cuda compilation tools, release 13.0, V13.0.88".
_NVCC_RELEASE = re.compile(r"release (\d+)\.(\d+)")


def extension_dir(name: str) -> Path:
    """The folder where the extension ``name`` is built and cached, created if needed."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"an extension name must be a Python identifier such as 'dense_cpp', not {name!r}")
    # build_dir, not state_dir: ninja and the compiler take the folder unquoted, and split it at a space.
    path = build_dir(STATE_NAME) / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def _cxx() -> str:
    """The compiler PyTorch's extension builder calls: ``cl`` on Windows, else ``$CXX`` or ``c++``."""
    return "cl" if sys.platform == "win32" else os.environ.get("CXX", "c++")


def _ninja() -> str | None:
    """ninja on ``PATH``; failing that, the one the ``ninja`` Python package installed, which is then put on
    ``PATH`` because PyTorch runs ``ninja`` by name."""
    found = shutil.which("ninja")
    if found:
        return found
    try:
        import ninja
    except ImportError:
        return None
    folder = getattr(ninja, "BIN_DIR", None)
    if not folder or shutil.which("ninja", path=folder) is None:
        return None
    os.environ["PATH"] = folder + os.pathsep + os.environ.get("PATH", "")
    return shutil.which("ninja")


def _python_headers() -> Path:
    return Path(sysconfig.get_paths()["include"]) / "Python.h"


def nvcc_path(cuda_home: str | os.PathLike) -> Path:
    """Where PyTorch's extension builder runs nvcc from: ``<CUDA_HOME>/bin/nvcc`` (``nvcc.exe`` on Windows)."""
    return Path(cuda_home) / "bin" / ("nvcc.exe" if sys.platform == "win32" else "nvcc")


def nvcc_release(nvcc: str | os.PathLike, timeout: float = 60) -> str | None:
    """The CUDA release ``nvcc --version`` reports (``"13.0"``), or None when it cannot be run or says none."""
    try:
        done = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=timeout,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    match = _NVCC_RELEASE.search(done.stdout)
    return f"{match.group(1)}.{match.group(2)}" if match else None


def _cuda_major(version: str | None) -> int | None:
    match = re.match(r"\s*(\d+)", str(version)) if version else None
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class BuildTools:
    """What this machine has for building PyTorch extensions. Paths are ``None`` where a tool is missing."""

    compiler: str | None
    ninja: str | None
    python_headers: str | None
    torch_cuda: str | None = None
    cuda_device: bool = False
    cuda_home: str | None = None
    nvcc: str | None = None  # <cuda_home>/bin/nvcc, where that file exists
    nvcc_cuda: str | None = None  # the release it reports, "13.0"
    notes: tuple[str, ...] = field(default=())

    @property
    def cpp_reason(self) -> str | None:
        """Why a C++ extension cannot be built here, or ``None`` when it can."""
        missing = []
        if self.compiler is None:
            missing.append(f"no C++ compiler ({_cxx()} is not on PATH; install g++ or clang, or set CXX)")
        if self.ninja is None:
            missing.append("no ninja build tool (pip install ninja)")
        if self.python_headers is None:
            missing.append("no Python headers (Python.h; on Debian/Ubuntu, apt install python3-dev)")
        return "; ".join(missing) if missing else None

    @property
    def can_build_cpp(self) -> bool:
        return self.cpp_reason is None

    @property
    def cuda_reason(self) -> str | None:
        """Why a CUDA extension cannot be built and run here, or ``None`` when it can."""
        missing = []
        if self.torch_cuda is None:
            missing.append("this PyTorch is not a CUDA build (torch.version.cuda is None)")
        elif not self.cuda_device:
            missing.append("PyTorch sees no CUDA device")
        elif self.cuda_home is None:
            missing.append("the CUDA toolkit was not found (set CUDA_HOME to the folder holding bin/nvcc)")
        else:
            toolkit = self.toolkit_reason
            if toolkit:
                missing.append(toolkit)
        if self.cpp_reason:
            missing.append(self.cpp_reason)
        return "; ".join(missing) if missing else None

    @property
    def toolkit_reason(self) -> str | None:
        """What is wrong with the CUDA toolkit PyTorch found (``cuda_home``), or None: it must hold ``bin/nvcc``,
        and nvcc's CUDA major must be the one PyTorch was built for."""
        if self.cuda_home is None:
            return None
        if self.nvcc is None:
            return (f"CUDA_HOME is {self.cuda_home}, which has no bin/nvcc (set CUDA_HOME to the CUDA toolkit's "
                    "folder, the one holding bin/nvcc, or unset it)")
        if self.nvcc_cuda is None:
            return f"{self.nvcc} did not report its CUDA release (`nvcc --version` printed no 'release X.Y')"
        nvcc_major, torch_major = _cuda_major(self.nvcc_cuda), _cuda_major(self.torch_cuda)
        if torch_major is not None and nvcc_major != torch_major:
            return (f"nvcc in {self.cuda_home} is CUDA {self.nvcc_cuda} but this PyTorch is built for CUDA "
                    f"{self.torch_cuda}: the majors must match (load a CUDA {torch_major} toolkit, or set CUDA_HOME "
                    "to one)")
        return None

    @property
    def can_build_cuda(self) -> bool:
        return self.cuda_reason is None

    def __str__(self) -> str:
        lines = [
            f"C++ compiler:   {self.compiler or 'missing'}",
            f"ninja:          {self.ninja or 'missing'}",
            f"Python headers: {self.python_headers or 'missing'}",
            f"CUDA build of PyTorch: {self.torch_cuda or 'no'}; CUDA device: "
            f"{'yes' if self.cuda_device else 'no'}; CUDA toolkit: "
            f"{self._toolkit_text() if self.cuda_device else 'not looked for without a CUDA device'}",
            "C++ extension:  " + ("can be built" if self.can_build_cpp else f"cannot be built: {self.cpp_reason}"),
            "CUDA extension: " + ("can be built" if self.can_build_cuda else f"cannot be built: {self.cuda_reason}"),
        ]
        return "\n".join([*lines, *self.notes])

    def _toolkit_text(self) -> str:
        if self.cuda_home is None:
            return "missing"
        if self.nvcc is None:
            return f"{self.cuda_home} (no bin/nvcc there)"
        return f"{self.cuda_home} (nvcc {self.nvcc_cuda or 'of unknown release'})"


def build_tools() -> BuildTools:
    """Look for what ``load_inline`` needs: a C++ compiler, ninja and Python's headers for any extension,
    plus a CUDA build of PyTorch, a CUDA device and the CUDA toolkit for a CUDA one."""
    import torch

    notes = []
    on_path = shutil.which("ninja")
    ninja = _ninja()
    if ninja and not on_path:
        notes.append(f"(ninja was not on PATH; the ninja package's {Path(ninja).parent} was put in front of it)")
    headers = _python_headers()
    torch_cuda = getattr(torch.version, "cuda", None)
    cuda_device = bool(torch_cuda) and cuda_available()
    cuda_home = nvcc = nvcc_cuda = None
    if cuda_device:
        from torch.utils.cpp_extension import CUDA_HOME

        cuda_home = CUDA_HOME
    if cuda_home:
        # PyTorch takes CUDA_HOME (or CUDA_PATH) as it is, and load_inline checks neither that nvcc is there
        # nor its version: BuildTools.toolkit_reason does.
        candidate = nvcc_path(cuda_home)
        if candidate.is_file():
            nvcc, nvcc_cuda = str(candidate), nvcc_release(candidate)
    return BuildTools(
        compiler=shutil.which(_cxx()),
        ninja=ninja,
        python_headers=str(headers) if headers.is_file() else None,
        torch_cuda=torch_cuda,
        cuda_device=cuda_device,
        cuda_home=cuda_home,
        nvcc=nvcc,
        nvcc_cuda=nvcc_cuda,
        notes=tuple(notes),
    )


def _libraries(folder: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in folder.iterdir() if p.suffix in _LIBRARY_SUFFIXES and p.is_file()}


def clear_stale_lock(folder: Path, older_than: float = STALE_LOCK_SECONDS) -> bool:
    """Remove the ``lock`` file an interrupted build left in ``folder`` (PyTorch would wait for it forever).

    Only a lock older than ``older_than`` seconds is removed: a younger one may belong to a build running in
    another process. Returns whether a lock was removed.
    """
    lock = Path(folder) / "lock"
    try:
        age = time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return False
    if age < older_than:
        return False
    lock.unlink(missing_ok=True)
    return True


@dataclass
class Build:
    """One call of ``load_inline`` (or ``load``): where it built, how long it took, whether it compiled."""

    name: str
    directory: Path
    seconds: float | None = None
    compiled: bool | None = None
    cleared_lock: bool = False

    def _where(self) -> str:
        try:
            return str(self.directory.relative_to(project_root()))
        except (ValueError, FileNotFoundError):
            return str(self.directory)

    def __str__(self) -> str:
        if self.seconds is None:
            return f"{self.name}: not built yet (building in {self._where()})"
        lock = " (a stale lock of an interrupted build was removed first)" if self.cleared_lock else ""
        if self.compiled:
            return (f"{self.name}: compiled in {self.seconds:.1f} s{lock}; cached in {self._where()}, so the "
                    "next run loads it without compiling")
        return (f"{self.name}: loaded in {self.seconds:.2f} s from the cache in {self._where()}{lock}: "
                "sources and flags unchanged, nothing was compiled")


@contextmanager
def timed_build(name: str) -> Iterator[Build]:
    """Time the build of extension ``name`` in the ``with`` block, which builds into ``build.directory``::

        with timed_build("dense_cpp") as build:
            module = load_inline("dense_cpp", ..., build_directory=build.directory)
        print(build)  # compiled in 31.2 s, or loaded from the cache

    A build compiled when the extension's library file in that folder is new or changed afterwards.
    """
    directory = extension_dir(name)
    build = Build(name=name, directory=directory)
    build.cleared_lock = clear_stale_lock(directory)
    before = _libraries(directory)
    start = time.perf_counter()
    try:
        yield build
    finally:
        build.seconds = time.perf_counter() - start
        after = _libraries(directory)
        build.compiled = any(before.get(path) != stamp for path, stamp in after.items())


def ptx_function(ptx: str, entry: str) -> str:
    """The text of the kernel ``entry`` (its ``.entry`` line to its closing brace) in a PTX listing."""
    start = re.search(rf"\.entry\s+{re.escape(entry)}\s*\(", ptx)
    if start is None:
        raise ValueError(f"no kernel {entry!r} in this PTX; its kernels are {cuda_compiler.ptx_entries(ptx)}")
    body = ptx.find("{", start.end())
    depth = 0
    for index in range(body, len(ptx)):
        depth += {"{": 1, "}": -1}.get(ptx[index], 0)
        if depth == 0:
            return ptx[start.start():index + 1]
    raise ValueError(f"the PTX of {entry!r} ends before its closing brace")


def ptx_excerpt(ptx: str, entry: str, highlights: Iterable[str] = PTX_HIGHLIGHTS) -> str:
    """The ``.entry`` line of kernel ``entry`` and those of its lines that contain one of ``highlights``,
    without indentation: a PTX listing is long, and these lines show the index arithmetic, the bounds guard,
    the loads and stores and the maths."""
    highlights = tuple(highlights)
    lines = ptx_function(ptx, entry).splitlines()
    kept = [" ".join(line.split()) for line in lines[1:] if any(h in line for h in highlights)]
    return "\n".join([lines[0].strip(), *kept])


@dataclass(frozen=True)
class PTXListing:
    """nvcc's PTX for one CUDA source: the kernels it defines, and the telling lines of any of them."""

    text: str
    arch: str

    @property
    def entries(self) -> list[str]:
        """The (mangled) names of the kernels the PTX defines, in order."""
        return cuda_compiler.ptx_entries(self.text)

    def entry(self, containing: str) -> str:
        """The one kernel whose name contains ``containing`` (``"forward_kernelIf"``: the ``float`` instance)."""
        found = [name for name in self.entries if containing in name]
        if len(found) != 1:
            raise ValueError(f"{len(found)} kernels' names contain {containing!r}; the kernels are {self.entries}")
        return found[0]

    def excerpt(self, containing: str) -> str:
        """:func:`ptx_excerpt` of the kernel whose name contains ``containing``."""
        return ptx_excerpt(self.text, self.entry(containing))


def ptx_listing(source: str, arch: str = "sm_80") -> PTXListing | None:
    """Compile the CUDA ``source`` to PTX for ``arch`` with nvcc, which needs no GPU; ``None`` where nvcc (NVIDIA's
    CUDA toolkit) is not installed. A source that does not compile raises :class:`gpukit.base.nvcc.CudaCompileError`
    with nvcc's message."""
    if cuda_compiler.find_nvcc() is None:
        return None
    return PTXListing(text=cuda_compiler.compile_cuda(source, arch=arch, output="ptx"), arch=arch)
