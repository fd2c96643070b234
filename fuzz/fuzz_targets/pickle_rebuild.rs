//! The rebuild of a pickled `dlport.Tensor` from its in-band fields and the buffer an engine
//! hands back (`python/pyo3/src/reduce.rs`, compiled here as it is; the Python package's
//! `Tensor._rebuild` calls the same function with the buffer it got from the buffer protocol).
//! Whatever the dtype name, memory name, flags, shape, strides and buffer length: `rebuild`
//! never panics, and a tensor it accepts lies wholly in the buffer, which it fills exactly (the
//! bytes its elements reach, from element 0 at the buffer's start, are the buffer's length),
//! keeps READ_ONLY when the flags say so, and reads back the buffer's bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../python/pyo3/src/reduce.rs"]
mod reduce;

use reduce::{Reduced, rebuild};

/// Names a pickle may carry: dlport's own (every storage width, sub-byte and vector ones
/// included), and names dlport must refuse.
const DTYPES: &[&str] = &[
    "float32",
    "bfloat16",
    "uint8",
    "int4",
    "uint4",
    "float4_e2m1fn",
    "float4_e2m1fn_x2",
    "float6_e2m3fn",
    "bool",
    "complex128",
    "float8_e4m3fn",
    "int64",
    "float33",
    "dtype(code=2, bits=32, lanes=1)",
    "float",
    "",
];
const MEMORY: &[&str] = &["cpu", "cuda_host:0", "cuda:3", "cuda_managed:1", "cuda:-1", "x"];
/// The allocation limit the target runs under: 1 MiB (buffers are at most 64 KiB).
const LIMIT: u64 = 1 << 20;

/// Reads the fuzzer's bytes as fields; zeros once they run out.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        let (first, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        *first
    }
    /// Mostly small values (-1 to 9), sometimes any 64-bit value.
    fn extent(&mut self) -> i64 {
        match self.u8() {
            m if m < 224 => i64::from(m % 11) - 1,
            _ => i64::from_le_bytes(std::array::from_fn(|_| self.u8())),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input(data);
    let dtype = DTYPES[usize::from(inp.u8()) % DTYPES.len()];
    let memory = MEMORY[usize::from(inp.u8()) % MEMORY.len()];
    let flags = match inp.u8() {
        f if f < 240 => u64::from(f & 0b111),
        _ => u64::from_le_bytes(std::array::from_fn(|_| inp.u8())),
    };
    let ndim = usize::from(inp.u8() % 70);
    let with_strides = inp.u8() % 2 == 1;
    let shape: Vec<i64> = (0..ndim).map(|_| inp.extent()).collect();
    let strides_len = if inp.u8() < 250 { ndim } else { ndim + 1 };
    let strides: Vec<i64> = (0..strides_len).map(|_| inp.extent()).collect();
    let len = usize::from(u16::from_le_bytes([inp.u8(), inp.u8()]));
    let buffer: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
    let fields = Reduced {
        dtype,
        shape: &shape,
        strides: with_strides.then_some(&strides[..]),
        flags,
        memory,
    };
    let Ok((managed, origin)) = rebuild(buffer, &fields, LIMIT) else {
        return;
    };
    assert!(origin.has_valid_id());
    assert!(flags & !reduce::SENT_FLAGS == 0, "accepted flags {flags:#x}");
    let view = managed.view();
    assert_eq!(view.shape(), &shape[..]);
    let span = view.byte_span();
    if view.numel() == 0 {
        assert_eq!(len, 0, "an empty tensor over {len} bytes");
        return;
    }
    assert!(span.lo >= 0, "reaches {} bytes before the buffer", -span.lo);
    assert_eq!(span.hi as usize, len, "the buffer is not exactly the tensor's bytes");
    assert_eq!(managed.is_read_only(), flags & 1 != 0);
    let first = view.first_element_address().expect("host memory") as *const u8;
    // SAFETY: the span [lo, hi) from the first element lies in `len` bytes of the buffer,
    // which `managed` owns and keeps alive (checked just above).
    let bytes = unsafe { std::slice::from_raw_parts(first, len) };
    assert!(bytes.iter().enumerate().all(|(i, &b)| b == (i * 7) as u8));
});
