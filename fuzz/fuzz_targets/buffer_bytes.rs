//! The byte counts a `dlport.Tensor` reports (`python/pyo3/src/geometry.rs`, compiled here as it
//! is: the Python package's buffer protocol and `Tensor.nbytes` call the same functions) over
//! tensors the import accepts (`validate_metadata`) and fields it would refuse: any dtype, 0 to
//! 69 axes, extents and strides mostly small, sometimes near a power of two or any 64-bit value.
//! Proves: no panic (the target builds with overflow checks on, as the dev profile does), and
//! - `nbytes` is the exact compact byte count: `ceil(Π extents × bits / 8)` in big-integer
//!   arithmetic here, 0 with an extent of 0, for every tensor the import accepts;
//! - the buffer protocol's numbers are true or refused: an accepted view has `len` =
//!   `Π extents × itemsize` at most `isize::MAX`, the extents as they are and byte strides =
//!   strides × itemsize, exactly; a refusal is a tensor whose bytes or byte strides do not fit
//!   `isize`, or whose dtype has no struct format.
#![no_main]
use libfuzzer_sys::fuzz_target;

mod common;
#[allow(dead_code)]
#[path = "../../python/pyo3/src/geometry.rs"]
mod geometry;

use common::Input;
use dlport_core::abi::{DLPackVersion, TypeCode};
use dlport_core::{DataType, layout};

/// The dtypes: every one with a buffer format, and some without (sub-byte, vector, bfloat16).
fn dtype(inp: &mut Input<'_>) -> DataType {
    const ALL: &[DataType] = &[
        DataType::BOOL,
        DataType::INT8,
        DataType::INT16,
        DataType::INT32,
        DataType::INT64,
        DataType::UINT8,
        DataType::UINT16,
        DataType::UINT32,
        DataType::UINT64,
        DataType::FLOAT16,
        DataType::FLOAT32,
        DataType::FLOAT64,
        DataType::COMPLEX64,
        DataType::COMPLEX128,
        DataType::BFLOAT16,
    ];
    match inp.u8() % 20 {
        n @ 0..15 => ALL[usize::from(n)],
        15 => DataType::new(TypeCode::INT, 4, 1),
        16 => DataType::new(TypeCode::FLOAT, 32, 4),
        17 => DataType::new(TypeCode::UINT, inp.u8(), inp.u16()),
        _ => DataType::new(TypeCode(inp.u8()), inp.u8(), inp.u16().max(1)),
    }
}

/// Mostly small values; sometimes a power of two (±1), i64's edges or any 64-bit value.
fn number(inp: &mut Input<'_>) -> i64 {
    match inp.u8() % 16 {
        0..4 => {
            let p = 1i64 << (inp.u8() % 63);
            p + i64::from(inp.u8() % 3) - 1
        }
        4 => inp.i64(),
        _ => i64::from(inp.u8() % 5),
    }
}

/// `Π shape` as an exact big number: a little-endian vector of u64 limbs.
fn product(shape: &[i64], times: u64) -> Vec<u64> {
    let mut limbs = vec![times];
    for &n in shape {
        let mut carry = 0u128;
        for limb in &mut limbs {
            let v = u128::from(*limb) * u128::from(n as u64) + carry;
            *limb = v as u64;
            carry = v >> 64;
        }
        if carry != 0 {
            limbs.push(carry as u64);
        }
    }
    limbs
}

/// A big number as u128, `None` past it.
fn small(limbs: &[u64]) -> Option<u128> {
    let (low, high) = limbs.split_at(limbs.len().min(2));
    high.iter().all(|&l| l == 0).then(|| {
        low.iter()
            .rev()
            .fold(0u128, |acc, &l| (acc << 64) | u128::from(l))
    })
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input(data);
    let dtype = dtype(&mut inp);
    let ndim = match inp.u8() % 16 {
        0 => usize::from(inp.u8() % 70),
        n => usize::from(n % 6),
    };
    let shape: Vec<i64> = (0..ndim).map(|_| number(&mut inp)).collect();
    let strides: Vec<i64> = (0..ndim).map(|_| number(&mut inp)).collect();
    let nbytes = geometry::nbytes(dtype, &shape);
    let buffer = geometry::buffer(dtype, &shape, &strides);
    let Ok(checked) = layout::validate_metadata(
        dtype,
        &shape,
        Some(&strides),
        Some(DLPackVersion::CURRENT),
        0,
    ) else {
        return;
    };
    // An accepted tensor: its compact bits, exactly.
    let bits = product(&shape, u64::from(dtype.storage_bits(false)));
    let exact = small(&bits).expect("at most i64::MAX elements of at most 2^24 bits");
    let nbytes = nbytes.expect("nbytes of a tensor the import accepts");
    assert_eq!(nbytes, exact.div_ceil(8), "nbytes of {dtype} {shape:?}");
    if checked.numel == 0 {
        assert_eq!(nbytes, 0, "an empty {dtype} {shape:?}");
    }
    let itemsize = dtype.size_bytes();
    let bytes = small(&product(&shape, itemsize as u64));
    let byte_strides: Option<Vec<isize>> = strides
        .iter()
        .map(|&s| isize::try_from(i128::from(s) * itemsize as i128).ok())
        .collect();
    match buffer {
        Ok(g) => {
            assert_eq!(g.itemsize as usize, itemsize);
            assert_eq!(Some(g.len as u128), bytes, "len of {dtype} {shape:?}");
            assert_eq!(g.len as u128, nbytes, "len and nbytes of {dtype} {shape:?}");
            let extents: Vec<isize> = shape.iter().map(|&n| n as isize).collect();
            assert_eq!(&g.dims[..ndim], &extents[..]);
            assert_eq!(Some(&g.dims[ndim..]), byte_strides.as_deref());
        }
        Err(message) => {
            let fits = bytes.is_some_and(|b| b <= isize::MAX as u128);
            assert!(
                message.contains("no buffer-protocol format") || !fits || byte_strides.is_none(),
                "refused {dtype} {shape:?} strides {strides:?}: {message}"
            );
        }
    }
});
