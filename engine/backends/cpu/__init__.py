"""The CPU backend (the NumPy backend) and its Numba kernels.

``backend``: the backend class. ``runtime``: what every kernel runs on (OpenMP settings, cores and threads, BLAS
through ctypes, work buffers); ``memory``: arrays that start a cache line; ``compile_cache``: whether the kernels
are compiled already and the lock a background compile holds; ``warmup``: that background compile. One module per
kernel family: ``winograd``, ``im2col``, ``microkernel`` and ``panels``, ``depthwise`` and ``depthwise_tile``,
``grouped``, ``few_outputs``, ``pooling``, ``dense`` and ``dot_tile``, ``elementwise``, ``upsample`` (with
``epilogue``, the fused activation they share, and ``blocks``, small compiled helpers). ``ops``: the operations the
backend offers by name (``Backend.kernel``), the candidates of each a row of an
``engine.backends.selection.OperationTable``.

Nothing here imports Numba until a kernel module is imported (``backend.cpu_kernels``)."""
