"""The upstream cases (issue #57): DLPack failures of JAX, PyTorch and NumPy that a user meets
and searches for, each with its upstream thread and the dlport call that gets the tensor across.

Each entry is one test in this directory, named by ``test``. ``error`` is the framework's message
as a user would search for it; ``call`` the dlport call; ``answer`` what it does (a view, one
copy, or a refusal that names why). ``scripts/upstream_report.py`` renders the README section
"Errors dlport gets past" from these and the suite's last run (``last-run.json``).
"""

JAX = "https://github.com/jax-ml/jax/issues/"

CASES = [
    {
        "number": "1",
        "test": "test_jax_17285_bare_capsule",
        "what": "a bare capsule (TensorFlow, Paddle, older producers) into JAX",
        "error": "TypeError",
        "upstream": [JAX + "17285"],
        "call": "jax.dlpack.from_dlpack(dlport.from_dlpack(capsule))",
        "answer": "a view (same address)",
    },
    {
        "number": "2",
        "test": "test_jax_24680_negative_strides",
        "what": "a negative-stride NumPy view into JAX",
        "error": "UNIMPLEMENTED: Only DLPack tensors with trivial (compact) striding are supported",
        "upstream": [JAX + "24680"],
        "call": 'jax.dlpack.from_dlpack(dlport.from_dlpack(v, layout="compact", align=64))',
        "answer": "one copy (Tensor.copied)",
    },
    {
        "number": "3",
        "test": "test_jax_24680_step_view",
        "what": "a step-2 NumPy view into JAX",
        "error": "UNIMPLEMENTED: Only DLPack tensors with trivial (compact) striding are supported",
        "upstream": [JAX + "24680"],
        "call": 'jax.dlpack.from_dlpack(dlport.from_dlpack(v, layout="compact", align=64))',
        "answer": "one copy (Tensor.copied)",
    },
    {
        "number": "4",
        "test": "test_torch2jax_6_broadcast",
        "what": "a broadcast (stride 0) NumPy view into JAX",
        "error": "UNIMPLEMENTED: Only DLPack tensors with trivial (compact) striding are supported",
        "upstream": ["https://github.com/rdyro/torch2jax/issues/6"],
        "call": 'jax.dlpack.from_dlpack(dlport.from_dlpack(v, layout="compact", align=64))',
        "answer": "one copy (Tensor.copied)",
    },
    {
        "number": "5",
        "test": "test_noissue_int4_numpy_to_jax",
        "what": "an int4 (ml_dtypes) NumPy array into JAX",
        "error": "DLPack only supports signed/unsigned integers, float and complex dtypes",
        "upstream": [],
        "call": "dlport.to_jax(a)",
        "answer": "one copy (jax.device_put)",
    },
    {
        "number": "6",
        "test": "test_noissue_uint4_numpy_to_jax",
        "what": "a uint4 (ml_dtypes) NumPy array into JAX",
        "error": "DLPack only supports signed/unsigned integers, float and complex dtypes",
        "upstream": [],
        "call": "dlport.to_jax(a)",
        "answer": "one copy (jax.device_put)",
    },
    {
        "number": "7",
        "test": "test_noissue_float4_numpy_to_jax",
        "what": "a float4_e2m1fn (ml_dtypes) NumPy array into JAX",
        "error": "DLPack only supports signed/unsigned integers, float and complex dtypes",
        "upstream": [],
        "call": "dlport.to_jax(a)",
        "answer": "one copy (jax.device_put)",
    },
    {
        "number": "8",
        "test": "test_noissue_jax_int4_out",
        "what": "a JAX int4 array out to NumPy",
        "error": "UNIMPLEMENTED: XLA type S4 has no DLPack equivalent",
        "upstream": [],
        "call": "dlport.to_numpy(x)",
        "answer": "one copy (JAX's own transfer)",
    },
    {
        "number": "9",
        "test": "test_jax_22346_pinned_host",
        "what": "host memory advertised as pinned (kDLCUDAHost) into a CPU-only JAX",
        "error": "Unknown backend cuda",
        "upstream": [JAX + "22346", JAX + "37896"],
        "call": "jax.dlpack.from_dlpack(dlport.from_dlpack(x))",
        "answer": "a view (same address)",
    },
    {
        "number": "10",
        "test": "test_jax_37896_managed",
        "what": "host memory advertised as managed (kDLCUDAManaged) into a CPU-only JAX",
        "error": "unsupported device type (DLDeviceType: 13)",
        "upstream": [JAX + "37896"],
        "call": "jax.dlpack.from_dlpack(dlport.from_dlpack(x))",
        "answer": "a view (same address)",
    },
    {
        "number": "11",
        "test": "test_pytorch_96318_managed",
        "what": "managed memory (kDLCUDAManaged) into PyTorch",
        "error": "Unsupported device_type: 13",
        "upstream": ["https://github.com/pytorch/pytorch/issues/96318"],
        "call": "torch.from_dlpack(dlport.from_dlpack(x))",
        "answer": "a view (same address)",
    },
    {
        "number": "12",
        "test": "test_array_api_tests_433_meta",
        "what": "a torch meta tensor: ValueError where the array API asks for BufferError",
        "error": "ValueError: Unknown device type meta for Dlpack",
        "upstream": ["https://github.com/data-apis/array-api-tests/issues/433"],
        "call": "dlport.from_dlpack(t)",
        "answer": "refused: a BufferError naming `__dlpack_device__` (no memory to take)",
    },
    {
        "number": "13",
        "test": "test_jax_40789_read_only",
        "what": "a JAX 0.10.2 array exported as a legacy capsule without READ_ONLY",
        "error": "no error: a writable view of an immutable array",
        "upstream": [JAX + "40789"],
        "call": "dlport.from_dlpack(x)",
        "answer": "a READ_ONLY view (same address)",
    },
    {
        "number": "14",
        "test": "test_noissue_bfloat16_to_numpy",
        "what": "a bfloat16 (and float8) tensor into NumPy",
        "error": "Unsupported dtype in DLTensor",
        "upstream": [],
        "call": "dlport.to_numpy(t)",
        "answer": "a view as an ml_dtypes array (same address)",
    },
]

BY_TEST = {c["test"]: c for c in CASES}
