//! Shared helpers: a little reader over the fuzz input, and a tensor built from it over a
//! backing buffer that the harness owns.
#![allow(dead_code)]

use dlport_core::abi::{DLTensor, DeviceType, TypeCode};
use dlport_core::{DataType, Device};

pub struct Input<'a>(pub &'a [u8]);

impl Input<'_> {
    pub fn u8(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    pub fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | (u64::from(self.u32()) << 32)
    }
    /// Mostly small values, sometimes extreme ones: finds edges faster than uniform bytes.
    pub fn i64(&mut self) -> i64 {
        match self.u8() % 8 {
            0 => self.u64() as i64,
            1 => -(i64::from(self.u8() % 8)),
            2 => i64::MAX - i64::from(self.u8() % 4),
            3 => i64::MIN + i64::from(self.u8() % 4),
            _ => i64::from(self.u8() % 9),
        }
    }
}

/// The fields of a fuzzed tensor; `shape` and `strides` always hold 64 values so that any
/// `ndim` the validator accepts reads inside them.
pub struct Fields {
    pub ndim: i32,
    pub shape: [i64; 64],
    pub strides: [i64; 64],
    pub null_shape: bool,
    pub null_strides: bool,
    pub dtype: DataType,
    pub device: Device,
    pub byte_offset: u64,
    pub data_offset: usize,
    pub null_data: bool,
    pub version: (u32, u32),
    pub flags: u64,
}

pub fn fields(inp: &mut Input<'_>) -> Fields {
    let ndim = match inp.u8() % 8 {
        0 => inp.u32() as i32,
        1 => 64 + i32::from(inp.u8() % 3),
        _ => i32::from(inp.u8() % 6),
    };
    let mut shape = [1i64; 64];
    let mut strides = [1i64; 64];
    for i in 0..(ndim.clamp(0, 8) as usize) {
        shape[i] = inp.i64();
        strides[i] = inp.i64();
    }
    let code = match inp.u8() % 4 {
        0 => inp.u8(),
        _ => inp.u8() % 19,
    };
    let bits = match inp.u8() % 4 {
        0 => inp.u8(),
        _ => [1u8, 4, 6, 8, 16, 32, 64, 128][usize::from(inp.u8() % 8)],
    };
    let lanes = if inp.u8() % 8 == 0 { inp.u16() } else { 1 + u16::from(inp.u8() % 2) };
    let device_type = match inp.u8() % 4 {
        0 => inp.u32() as i32,
        1 => 3,
        _ => 1,
    };
    let flags_byte = inp.u8();
    Fields {
        ndim,
        shape,
        strides,
        null_shape: flags_byte & 1 != 0 && flags_byte & 2 != 0,
        null_strides: flags_byte & 4 != 0 && flags_byte & 8 != 0,
        dtype: DataType::new(TypeCode(code), bits, lanes),
        // Ids of the rule of device ids' list (testkit's device_ids.txt) and any 32-bit value.
        device: Device::new(
            DeviceType(device_type),
            match inp.u8() % 8 {
                0 => inp.u32() as i32,
                1 => -1,
                2 => i32::MAX,
                n => i32::from(n % 3),
            },
        ),
        byte_offset: match inp.u8() % 4 {
            0 => inp.u64(),
            _ => u64::from(inp.u8()),
        },
        data_offset: usize::from(inp.u16() % 4096),
        null_data: flags_byte & 16 != 0 && flags_byte & 32 != 0,
        version: match inp.u8() % 8 {
            0 => (inp.u32(), inp.u32()),
            1 => (0, 8),
            2 => (2, 0),
            _ => (1, u32::from(inp.u8() % 5)),
        },
        flags: if flags_byte & 64 != 0 { inp.u64() } else { u64::from(inp.u8() % 8) },
    }
}

impl Fields {
    pub fn tensor(&mut self, backing: &mut [u8]) -> DLTensor {
        DLTensor {
            data: if self.null_data {
                std::ptr::null_mut()
            } else {
                backing.as_mut_ptr().wrapping_add(self.data_offset).cast()
            },
            device: self.device,
            ndim: self.ndim,
            dtype: self.dtype,
            shape: if self.null_shape { std::ptr::null_mut() } else { self.shape.as_mut_ptr() },
            strides: if self.null_strides { std::ptr::null_mut() } else { self.strides.as_mut_ptr() },
            byte_offset: self.byte_offset,
        }
    }
}

/// Whether the validated span lies inside the backing buffer (only then may the harness read).
pub fn inside(view: &dlport_core::TensorRef<'_>, backing: &[u8]) -> bool {
    let Some(first) = view.first_element_address() else { return false };
    let base = backing.as_ptr() as usize;
    let span = view.byte_span();
    let lo = first as i128 + i128::from(span.lo);
    let hi = first as i128 + i128::from(span.hi);
    view.numel() == 0 || (lo >= base as i128 && hi <= (base + backing.len()) as i128)
}
