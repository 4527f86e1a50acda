"""Chapter 0, the environment check: what its exercises expect, and how a wrong answer is told apart."""

from __future__ import annotations

from numbers import Integral

from gpukit.base.errors import error_line

from .checking import Exercise, answer_device, register

# The batch of the exercise: 64 colour images of 224 x 224 pixels, 3 channels, stored as float16.
BATCH_SHAPE = (64, 3, 224, 224)


def _tensors_to_measure():
    """Tensors on the chosen device whose sizes in bytes a correct bytes_of must give: the exercise's batch,
    then tensors of other dtypes and ranks, so that a guessed element size or a count of rows only shows. The
    answer is a function, which carries no device: the lesson's (answer_device's default)."""
    import torch

    device = answer_device()
    return [torch.empty(BATCH_SHAPE, dtype=torch.float16, device=device),
            torch.empty(5, dtype=torch.float64, device=device),
            torch.empty(3, 4, dtype=torch.int8, device=device),
            torch.empty(2, 3, 7, dtype=torch.float32, device=device)]


def _counts_the_bytes_of_any_tensor(answer) -> str | None:
    if not callable(answer):
        return (f"expected your function bytes_of (a function of a tensor), got {type(answer).__name__}: pass the "
                "function itself, not a number.")
    for tensor in _tensors_to_measure():
        what = f"a {str(tensor.dtype).removeprefix('torch.')} tensor of shape {tuple(tensor.shape)}"
        try:
            got = answer(tensor)
        except Exception as error:  # the reader's code: any error is the answer to report
            return f"for {what} your function raised {error_line(error)}"
        if got is None:
            return "bytes_of returned None: replace the placeholder (None) with the computation, and run it again."
        if not isinstance(got, Integral) or isinstance(got, bool):
            return (f"for {what} your function returned a {type(got).__name__}, not a whole number of bytes (an int: "
                    "numel() and element_size() are ints, and / makes a float).")
        if got != tensor.numel() * tensor.element_size():
            return (f"for {what} your function returned {got:,} bytes, which is not its size: count every element "
                    "(all dimensions) and the bytes each element of its dtype takes.")
    return _needs_no_values(answer)


def _needs_no_values(answer) -> str | None:
    """What goes wrong when the tensor is on a GPU: there ``.numpy()`` raises and ``.cpu()`` copies the whole batch
    to the host, on the CPU both work. PyTorch's ``meta`` device (a shape and a dtype, no values) stands in for the
    GPU: a size worked out from the shape and the dtype alone works there, one that reads the values does not."""
    import torch

    batch = torch.empty(BATCH_SHAPE, dtype=torch.float16, device="meta")
    try:
        answer(batch)
    except Exception as error:  # the reader's code: any error is the answer to report
        raised = error_line(error).split(". ")[0].rstrip(" .!:")
        return (f"for the batch on a device other than the CPU (PyTorch's meta device, which has no values, stands "
                f"in for a GPU) your function raised {raised}: it reads the tensor's values on the host (.numpy(), "
                ".cpu(), .tolist()), which fails or copies the whole batch off the GPU. The size needs only the "
                "shape and the dtype.")
    return None


def _bytes_of_the_batch(answer) -> int:
    return answer(_tensors_to_measure()[0])


def _zeros_on_the_chosen_device():
    """The zeros on the learner's GPU where the answer is on one (the lesson chose it), else on the lesson's
    default device: zeros left on the CPU of a GPU machine, or made on meta, are then told apart."""
    import torch

    return torch.zeros(2, 3, dtype=torch.float32, device=answer_device())


register(
    Exercise("ex-env-batch-bytes", lambda: 64 * 3 * 224 * 224 * 2, method=_counts_the_bytes_of_any_tensor,
             result=_bytes_of_the_batch, rtol=0.0, writes="device code"),
    Exercise("ex-env-zeros-on-device", _zeros_on_the_chosen_device, writes="device code"),
)
