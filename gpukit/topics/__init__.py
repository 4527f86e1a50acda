"""One topic's helpers each, named for what they hold; a topic imports the layers below it, never another topic.

Lesson 2: local clusters on loopback (:mod:`~gpukit.topics.clusters`). Lesson 3: a CUDA kernel run on the CPU
(:mod:`~gpukit.topics.host_kernels`). Lesson 5: C++/CUDA extension builds (:mod:`~gpukit.topics.extensions`) and
torch.compile's cache (:mod:`~gpukit.topics.compile_cache`). Lesson 6: work in chunks that shrink on
out-of-memory errors (:mod:`~gpukit.topics.chunking`). Lesson 8: JAX devices and shards
(:mod:`~gpukit.topics.sharding`). Lesson 9: launch arithmetic (:mod:`~gpukit.topics.launch`), Numba's simulator
and Triton's interpreter (:mod:`~gpukit.topics.simulators`). Lesson 10: process groups on loopback
(:mod:`~gpukit.topics.distributed`). Lesson 11: Slurm (:mod:`~gpukit.topics.slurm`). Lesson 13: which operations
each backend supports (:mod:`~gpukit.topics.backend_support`). Lesson 14: profiler traces
(:mod:`~gpukit.topics.traces`). Lesson 15: random streams (:mod:`~gpukit.topics.random_streams`). Lesson 16: the
roofline from the bench files and Nsight Compute's CSV (:mod:`~gpukit.topics.performance`), memory-access counts
on Numba's simulator (:mod:`~gpukit.topics.memory_access`).
"""
