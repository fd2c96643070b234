"""The seed scenario, runnable anywhere: a pinned tensor of a PyTorch-like producer goes to JAX.

PyTorch's pinned tensors answer __dlpack_device__ with (kDLCUDAHost, 0) = (3, 0) while their
capsule says kDLCPU. A CPU-only JAX refuses them ("Unknown backend cuda"). Through dlport the
same memory reaches JAX without a copy, with no keyword: dlport presents host-accessible memory
as cpu, and `memory` says where it is. This uses dlport.testing's emulation of PyTorch's pinned
capsules, so it runs anywhere; with PyTorch and a GPU, `x = torch.arange(8.0).pin_memory()` is
the producer instead.

Run: .venv/bin/python python/examples/seed.py
"""

import jax
import numpy as np

import dlport

from dlport.testing import aligned, pinned_like

data = aligned(8, np.float32)
data[:] = np.arange(8)
x = pinned_like(data)  # like torch.arange(8.0).pin_memory()

try:
    jax.dlpack.from_dlpack(x)
except RuntimeError as e:
    print("JAX alone:", e)  # Unknown backend cuda

t = dlport.from_dlpack(x)  # the pinned memory itself, presented as cpu
print(t)  # dlport.Tensor(shape=(8,), dtype=float32, device=cpu, memory=cuda_host:0)
y = jax.dlpack.from_dlpack(t)
assert y.unsafe_buffer_pointer() == data.ctypes.data, "zero-copy"
print("JAX through dlport:", y)
del t, y
assert x.deleted == 1, "the producer's deleter ran exactly once"
print("producer released once")
