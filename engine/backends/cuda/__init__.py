"""The CuPy (CUDA) backend, by job: ``runtime`` compiles the CUDA C shipped in ``kernels/`` (package data, shared
by ``#include``) on first use; one module per kernel family (``conv_direct``, ``wgmma``, ``gather``, ``pooling``,
``elementwise``, ``upsample``), the cuDNN frontend (``cudnn``), the custom CUDA layers' launcher (``custom``), the
backend class (``backend``) and ``ops``, the operation tables whose rows are the candidates for each operation.

Importing this package imports nothing of CuPy; its modules do (all but ``device``, which imports it lazily)."""
