"""Which operations a PyTorch backend supports, found by running them, and the files that record it.

``torch.backends.mps.is_available()`` (or ``torch.cuda.is_available()``) says that a device can be opened,
not that every operation has a kernel for it, in every dtype, that computes the right answer. Each backend
(CPU, CUDA, MPS) carries its own kernel for each operation, and Apple's Metal has no float64 arithmetic on
the GPU at all. Some hosted macOS CI runners even report MPS available and then fail at the first tensor.
The only reliable answer is to run the operations.

:func:`probe` runs a list of small operations (:data:`OPERATIONS`) on each device and returns a table,
operation x device, whose cells are ``"ok"``, ``"wrong: ..."`` (it ran, but the result differs from a
float64 CPU reference) or ``"error: <type>: <first sentence of the message>"``. No timeouts are needed: the
inputs are a few 4 x 4 matrices.

:func:`write_support_file` saves a table as ``data/backend-support/<name>.json``; :func:`read_support_file`
reads one back and rejects a malformed or partial file with an error naming the file and the field;
:func:`read_support_folder` puts every machine's file side by side. ``python -m gpukit probe --write`` does
the probing and writing from a shell. The file's schema (:data:`SCHEMA`, version 1)::

    {
      "schema": "gpukit.backend-support/1",
      "machine": "free text: which computer, which GPU, which OS",
      "torch": "2.13.0",                 # torch.__version__ of the run
      "date": "2026-05-01",              # ISO date of the run
      "platform": "Linux-6.8-x86_64",   # platform.platform()
      "devices": {"cpu": "cpu (..., 2 logical cores)", "mps": "mps (Apple GPU ...)"},
      "results": {"matmul (float32)": {"cpu": "ok", "mps": "ok"}, ...}
    }

Every operation in ``results`` must have a (non-empty string) cell for every device in ``devices``, and
no other.
"""

from __future__ import annotations

import datetime as _dt
import json
import platform
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpukit.base.machine_files import RecordChecker, file_name, json_files, read_checked
from gpukit.base.paths import project_root
from gpukit.core.device import available_devices, describe_device, device_available, devices_to_run, validate_device

__all__ = [
    "OPERATIONS",
    "SCHEMA",
    "Operation",
    "SupportFileError",
    "default_machine_name",
    "probe",
    "read_support_file",
    "read_support_folder",
    "short_error",
    "support_folder",
    "support_record",
    "write_support_file",
]

SCHEMA = "gpukit.backend-support/1"
_FIELDS = ("schema", "machine", "torch", "date", "platform", "devices", "results")


# ------------------------------------------------------------------------------------------ operations
@dataclass(frozen=True)
class Operation:
    """One operation to try: its inputs, the call, and the value to compare with the CPU reference.

    ``inputs(generator)`` makes the inputs on the CPU in ``dtype``; ``call(*inputs)`` runs the operation
    wherever the inputs are; ``value(outputs, inputs)`` (on CPU tensors) returns one tensor that does not
    depend on the implementation's free choices (an LU factorisation's pivots, the signs of eigenvectors),
    e.g. the product ``P L U`` instead of the factors.
    """

    name: str
    dtype: str
    inputs: Callable
    call: Callable
    value: Callable | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"an operation needs a name, not {self.name!r}")
        if self.dtype not in _TOLERANCES:
            raise ValueError(f"operation {self.name!r}: dtype must be one of {sorted(_TOLERANCES)}, not {self.dtype!r}")


# Relative tolerance against the float64 reference, by the dtype the operation ran in.
_TOLERANCES = {"float32": 1e-4, "complex64": 1e-4, "float64": 1e-10, "complex128": 1e-10}


def _torch_dtype(name):
    import torch

    return getattr(torch, name)


def _matrices(gen, dtype, count=3, n=4):
    """``count`` well-conditioned ``n x n`` matrices: random, plus ``n`` on the diagonal."""
    import torch

    a = torch.randn(count, n, n, generator=gen, dtype=torch.float64)
    if dtype.startswith("complex"):
        a = torch.complex(a, torch.randn(count, n, n, generator=gen, dtype=torch.float64))
    return (a + n * torch.eye(n)).to(_torch_dtype(dtype))


def _spd(gen, dtype):
    """Symmetric (Hermitian) positive definite matrices: B B^H + n I."""
    import torch

    b = _matrices(gen, dtype)
    return b @ b.mH + 4 * torch.eye(b.shape[-1], dtype=b.dtype)


def _pair(gen, dtype):
    return _matrices(gen, dtype), _matrices(gen, dtype)


def _vector(gen, dtype, n=16):
    import torch

    x = torch.randn(n, generator=gen, dtype=torch.float64)
    if dtype.startswith("complex"):
        x = torch.complex(x, torch.randn(n, generator=gen, dtype=torch.float64))
    return x.to(_torch_dtype(dtype))


def _lu_product(outputs, inputs):
    import torch

    p, lower, upper = torch.lu_unpack(*outputs[:2])
    return p @ lower @ upper


def _operations() -> dict[str, Operation]:
    import torch

    la, fft = torch.linalg, torch.fft

    def op(name, dtype, inputs, call, value=None):
        return Operation(f"{name} ({dtype})", dtype, inputs, call, value)

    one = lambda make: (lambda gen, dtype: (make(gen, dtype),))  # noqa: E731 - a one-input maker
    ops = [
        op("copy to device", "float32", one(_vector), lambda x: x),
        op("elementwise", "float64", one(_vector), lambda x: torch.exp(x) + 3 * torch.sin(x)),
        op("elementwise", "complex64", one(_vector), lambda x: torch.exp(x) * x.conj()),
        op("matmul", "float32", _pair, torch.matmul),
        op("matmul", "float64", _pair, torch.matmul),
        op("matmul", "complex64", _pair, torch.matmul),
        op("linalg.det", "float32", one(_matrices), la.det),
        op("linalg.det", "complex64", one(_matrices), la.det),
        op("linalg.slogdet", "float32", one(_matrices), la.slogdet,
           lambda out, _: torch.stack([out[0], out[1]])),
        op("linalg.lu_factor", "float32", one(_matrices), la.lu_factor, _lu_product),
        op("linalg.lu_factor", "complex64", one(_matrices), la.lu_factor, _lu_product),
        op("linalg.lu", "float32", one(_matrices), la.lu, lambda out, _: out[0] @ out[1] @ out[2]),
        op("linalg.solve", "float32", _pair, la.solve),
        op("linalg.inv", "float32", one(_matrices), la.inv),
        op("linalg.cholesky", "float32", one(_spd), la.cholesky),
        op("linalg.qr", "float32", one(_matrices), la.qr, lambda out, _: out[0] @ out[1]),
        op("linalg.eigh", "float32", one(_spd), la.eigh, lambda out, _: out[0]),
        op("linalg.eig", "float32", one(_matrices), la.eig,
           lambda out, _: out[1] @ torch.diag_embed(out[0]) @ la.inv(out[1])),
        op("linalg.svd", "float32", one(_matrices), la.svd, lambda out, _: out[1]),
        op("fft.fft", "complex64", one(_vector), fft.fft),
        op("fft.rfft", "float32", one(_vector), fft.rfft),
    ]
    return {o.name: o for o in ops}


OPERATIONS: dict[str, Operation] = _operations()


# ------------------------------------------------------------------------------------------ probing
def short_error(error: BaseException, limit: int = 110) -> str:
    """``"<Type>: <first sentence>"`` of an exception, cut to about ``limit`` characters."""
    text = " ".join(str(error).split())
    sentence = re.split(r"(?<=[.!])\s", text, maxsplit=1)[0] if text else ""
    if len(sentence) > limit:
        sentence = sentence[: limit - 3].rstrip() + "..."
    return f"{type(error).__name__}: {sentence}" if sentence else type(error).__name__


def _outputs(result) -> tuple:
    return tuple(result) if isinstance(result, tuple | list) else (result,)


def _reference_dtype(dtype: str) -> str:
    return "complex128" if dtype.startswith("complex") else "float64"


def _compared(operation: Operation, outputs, inputs):
    value = operation.value(outputs, inputs) if operation.value is not None else outputs[0]
    return value.to(_torch_dtype("complex128" if value.is_complex() else "float64"))


def _try(operation: Operation, device: str, inputs, expected) -> str:
    import torch

    try:
        on_device = tuple(x.to(device) for x in inputs)
        outputs = tuple(out.cpu() for out in _outputs(operation.call(*on_device)))
        got = _compared(operation, outputs, inputs)
    except Exception as error:  # noqa: BLE001 - whatever the backend raised is the answer
        return f"error: {short_error(error)}"
    if got.shape != expected.shape:
        return f"wrong: shape {tuple(got.shape)}, expected {tuple(expected.shape)}"
    if not torch.isfinite(got).all():
        return "wrong: not finite"
    scale = expected.abs().max().clamp_min(1e-30)
    error = ((got - expected).abs().max() / scale).item()
    if error > _TOLERANCES[operation.dtype]:
        return f"wrong: relative error {error:.1e}"
    return "ok"


def _resolve_operations(operations) -> list[Operation]:
    if operations is None:
        return list(OPERATIONS.values())
    if isinstance(operations, str | Operation):
        operations = [operations]
    chosen, unknown = [], []
    for item in operations:
        if isinstance(item, Operation):
            chosen.append(item)
        elif isinstance(item, str) and item in OPERATIONS:
            chosen.append(OPERATIONS[item])
        else:
            unknown.append(item)
    if unknown:
        raise ValueError(f"unknown operation(s) {unknown}; the probe knows: {', '.join(OPERATIONS)}")
    names = [o.name for o in chosen]
    if len(set(names)) != len(names):
        raise ValueError(f"an operation is listed twice: {sorted(n for n in set(names) if names.count(n) > 1)}")
    if not chosen:
        raise ValueError("no operations to probe")
    return chosen


def probe(devices: Sequence[str] | str | None = None, operations: Iterable[str | Operation] | None = None,
          seed: int = 0):
    """Run each operation on each device and return the support table (a pandas DataFrame).

    ``devices`` defaults to every device present (:func:`gpukit.available_devices`); ``operations`` to
    every entry of :data:`OPERATIONS` (names, or :class:`Operation` objects). Each result is compared with
    the same operation run on the CPU in float64 (complex128). An unknown operation name, an unknown
    device name or a device that is not present here is a ``ValueError``, before anything runs.
    """
    import pandas as pd
    import torch

    ops, devs = _resolve_operations(operations), devices_to_run(devices, what="probe")
    rows = {}
    for operation in ops:
        inputs = operation.inputs(torch.Generator().manual_seed(seed), operation.dtype)
        wide = tuple(x.to(_torch_dtype(_reference_dtype(str(x.dtype).replace("torch.", ""))))
                     if x.is_floating_point() or x.is_complex() else x for x in inputs)
        expected = _compared(operation, _outputs(operation.call(*wide)), wide)
        rows[operation.name] = {d: _try(operation, d, inputs, expected) for d in devs}
    table = pd.DataFrame.from_dict(rows, orient="index", columns=devs)
    table.index.name = "operation"
    table.columns.name = "device"
    return table


# ------------------------------------------------------------------------------------------ files
class SupportFileError(ValueError):
    """A backend-support file that cannot be used: the message names the file and the bad field."""


def support_folder() -> Path:
    """``<repo>/data/backend-support``, where each machine's probe results are kept."""
    return project_root() / "data" / "backend-support"


def default_machine_name(devices: Iterable[str] | None = None) -> str:
    """A file name for this machine: system, architecture and device kinds, e.g. ``darwin-arm64-mps-cpu``."""
    devices = available_devices() if devices is None else [str(d) for d in devices]
    kinds = dict.fromkeys(d.split(":")[0] for d in devices)
    return file_name("-".join([platform.system(), platform.machine(), *kinds]))


def support_record(table, machine: str, date: str | None = None) -> dict:
    """The JSON-ready record of a probe ``table`` (see the module's schema), for ``machine`` (free text)."""
    import torch

    if not isinstance(machine, str) or not machine.strip():
        raise ValueError("describe the machine in words, e.g. 'MacBook Air M2, macOS 15.3', not "
                         f"{machine!r}")
    devices = [str(d) for d in table.columns]
    record = {
        "schema": SCHEMA,
        "machine": machine.strip(),
        "torch": torch.__version__,
        "date": date or _dt.date.today().isoformat(),
        "platform": platform.platform(),
        "devices": {d: describe_device(d) if device_available(d) else d for d in devices},
        "results": {str(op): {d: str(table.loc[op, d]) for d in devices} for op in table.index},
    }
    _validate(record, "the new record")
    return record


def write_support_file(table, machine: str, name: str | None = None, folder: str | Path | None = None,
                       date: str | None = None) -> Path:
    """Save ``table`` as ``<folder>/<name>.json`` (default ``data/backend-support/<this machine>.json``)."""
    record = support_record(table, machine, date=date)
    folder = Path(folder) if folder is not None else support_folder()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{file_name(name) if name else default_machine_name(list(table.columns))}.json"
    path.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def _validate(record, where: str) -> dict:
    check = RecordChecker(where, SupportFileError, SCHEMA)
    check.top(record, _FIELDS)
    for field in ("machine", "torch", "platform"):
        check.value(field, record[field], "text")
    check.date("date", record["date"])
    devices = record["devices"]
    for device, description in check.entries("devices", devices, "at least one device name to its description"):
        try:
            validate_device(device)
        except ValueError:
            check.fail(f"devices.{device}", "is not a device name (cuda, cuda:N, mps, cpu)")
        if not isinstance(description, str):
            check.fail(f"devices.{device}", "must be a string describing the device")
    for operation, cells in check.entries("results", record["results"],
                                          "at least one operation to its per-device results"):
        field = f"results.{operation}"
        if not isinstance(cells, dict):
            check.fail(field, "must map each device to a result")
        missing = [d for d in devices if d not in cells]
        if missing:
            check.fail(field, f"has no result for device(s) {missing} (a partial file)")
        unknown = [d for d in cells if d not in devices]
        if unknown:
            check.fail(field, f"names device(s) {unknown} that 'devices' does not list")
        for device, cell in cells.items():
            if not isinstance(cell, str) or not cell.strip():
                check.fail(f"{field}.{device}", "must be a non-empty string ('ok' or the short error)")
    return record


def read_support_file(path: str | Path) -> dict:
    """Read and check one machine's file; a malformed or partial file raises :class:`SupportFileError`."""
    return read_checked(path, _validate, SupportFileError)


def read_support_folder(folder: str | Path | None = None):
    """Every machine's results side by side: rows are operations, columns (file name, device).

    An operation a machine's file does not list shows as ``"not probed"``. Any malformed file stops the
    reading with an error naming it: a file is never silently left out.
    """
    import pandas as pd

    folder = Path(folder) if folder is not None else support_folder()
    columns = {}
    for path in json_files(folder, "python -m gpukit probe --write"):
        record = read_support_file(path)
        for device in record["devices"]:
            columns[(path.stem, device)] = {op: cells[device] for op, cells in record["results"].items()}
    table = pd.DataFrame(columns).fillna("not probed")
    table.columns = pd.MultiIndex.from_tuples(table.columns, names=["machine", "device"])
    table.index.name = "operation"
    return table


# ------------------------------------------------------------------------------------------ command line
def add_probe_command(commands) -> None:
    """Add ``probe`` to ``python -m gpukit``'s subcommands."""
    probe_parser = commands.add_parser(
        "probe", help="run the backend-support probe on this machine's devices (and save it with --write)")
    probe_parser.add_argument("--devices", nargs="+", help="devices to probe (default: every device present)")
    probe_parser.add_argument("--write", action="store_true",
                              help="save the results as data/backend-support/<name>.json")
    probe_parser.add_argument("--machine", help="the machine in words, e.g. 'MacBook Air M2, macOS 15.3' "
                                                "(needed with --write)")
    probe_parser.add_argument("--name", help="the file's name without .json (default: system-arch-devices)")
    probe_parser.add_argument("--folder", help="where to write (default: the book's data/backend-support)")


def run_probe_command(args) -> int:
    """Probe, print the table, and with ``--write`` save it; returns the process's exit status."""
    if args.write and not (args.machine and args.machine.strip()):
        print("--write needs --machine 'a description of this computer', e.g. 'MacBook Air M2, macOS 15.3'")
        return 2
    try:
        table = probe(devices=args.devices)
    except ValueError as error:
        print(f"error: {error}")
        return 2
    print(table.to_string())
    if args.write:
        path = write_support_file(table, args.machine, name=args.name, folder=args.folder)
        print(f"wrote {path}")
    return 0
