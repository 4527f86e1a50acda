"""``cupy.cuda`` of tests/gpu_node's CuPy stand-in: whether CUDA shows a GPU, and how many."""


def _visible() -> int:
    import sitecustomize

    counter = getattr(sitecustomize, "visible_gpus", None)
    return counter() if counter is not None else 1


def is_available() -> bool:
    return _visible() > 0


class runtime:  # noqa: N801 - the name CuPy uses
    @staticmethod
    def getDeviceCount() -> int:  # noqa: N802 - CuPy's name
        return _visible()

    @staticmethod
    def runtimeGetVersion() -> int:  # noqa: N802 - CuPy's name
        return 13020


def __getattr__(name):
    raise AttributeError(f"cupy.cuda.{name}: this is tests/gpu_node's stand-in for CuPy, which computes nothing")
