"""The book's own machinery, beside :mod:`gpukit` and never imported by it.

gpukit is what a learner's kernel imports. This package is what the book's authors and instructors run from a
checkout of the book, on a laptop, a CI runner or a GPU node:

- :mod:`booktools.gpu_check`: ``make gpu-check`` (``python -m booktools gpu-check``), every lesson, the GPU tests
  and the benchmark suite on a GPU node within a time budget, each lesson kept in ``data/gpu-runs/`` as it passes;
  the kept runs' store, which the site build reads (``_ext/gpu_runs.py``);
- :mod:`booktools.node_packages`: what ``gpu-check --wheelhouse`` installs on a node without network;
- :mod:`booktools.bench`: ``python -m booktools bench``, the benchmark suite that writes ``data/benchmarks/``.

It imports gpukit (the device, timing and the doctor's facts), never the reverse: ``tests/book/test_layers.py``
holds both to that.
"""
