"""The commands of ``python -m gpukit``, an attendee's tools; they may import every layer below.

``doctor`` (:mod:`~gpukit.commands.doctor`) and ``doctor --gpu`` (:mod:`~gpukit.commands.preflight`); ``probe`` is
:mod:`gpukit.topics.backend_support`'s. The book's own commands (the benchmark suite, ``make gpu-check``) live in
:mod:`booktools`, beside gpukit.
"""
