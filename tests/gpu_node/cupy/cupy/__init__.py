"""tests/gpu_node's stand-in for CuPy (cupy-cuda13x 14.2.0 on the book's first GPU node): ``import cupy`` works and
``cupy.cuda.is_available()`` answers as CUDA would (CUDA_VISIBLE_DEVICES can hide the node's one GPU), so that
code which asks whether CuPy is there meets what a GPU node has. It computes nothing: any other name raises
AttributeError saying so. A test that needs CuPy's absence hides it (GPUKIT_TEST_HIDE=cupy)."""

from . import cuda as cuda

__version__ = "14.2.0"
STAND_IN = True


def __getattr__(name):
    raise AttributeError(f"cupy.{name}: this is tests/gpu_node's stand-in for CuPy, which can be imported and "
                         "computes nothing")
