//! Data types: names, validity rules, byte sizes (sub-byte packing included) and the sealed
//! [`Element`] trait that ties Rust types to DLPack types.

use core::fmt;

use crate::abi::TypeCode;

mod check;

/// `DLDataType`: a type code, a bit width and a lane count. Same layout as the C struct.
///
/// # Examples
///
/// ```
/// use dlport_core::DataType;
/// use dlport_core::abi::TypeCode;
///
/// assert_eq!(DataType::FLOAT32.to_string(), "float32");
/// assert_eq!("bfloat16".parse::<DataType>()?, DataType::BFLOAT16);
/// assert_eq!(DataType::FLOAT4_E2M1FN_X2.to_string(), "float4_e2m1fn_x2");
/// assert_eq!(DataType::new(TypeCode::INT, 4, 1).storage_bits(false), 4); // int4, packed
/// assert!("float33x".parse::<DataType>().is_err());
/// # Ok::<(), dlport_core::Error>(())
/// ```
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, bytemuck::Zeroable, bytemuck::Pod)]
pub struct DataType {
    /// Type code (any 8-bit value may arrive from foreign code).
    pub code: TypeCode,
    /// Bits of one lane.
    pub bits: u8,
    /// Number of lanes (1 for scalars).
    pub lanes: u16,
}

/// Which rule of [`DataType::validate`] a type breaks (the error is built only when asked).
#[derive(Clone, Copy)]
enum DtypeFault {
    UnknownCode,
    Bits(&'static str),
    Lanes(&'static str),
}

/// For each bit width, `k + 1` when it is `8 << k` bits (k = 0..=4, 8 to 128 bits), else 0.
const WIDTH_OF_BITS: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut k = 0;
    while k < 5 {
        table[8 << k] = k as u8 + 1;
        k += 1;
    }
    table
};

/// For each type code, bit `k + 1` is set when the scalar type of `8 << k` bits (k = 0..=4)
/// passes [`DataType::validate`], computed by the rules themselves at compile time; bit 0 is
/// never set.
const BYTE_WIDTHS: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut code = 0;
    while code < 256 {
        let mut k = 0;
        while k < 5 {
            if DataType::new(TypeCode(code as u8), 8 << k, 1).is_valid() {
                table[code] |= 2 << k;
            }
            k += 1;
        }
        code += 1;
    }
    table
};

macro_rules! scalar_consts {
    ($($(#[$m:meta])* $name:ident = $code:ident, $bits:expr;)*) => {
        impl DataType {
            $($(#[$m])* pub const $name: Self = Self::new(TypeCode::$code, $bits, 1);)*
        }
    };
}

scalar_consts! {
    /// `int8`.
    INT8 = INT, 8;
    /// `int16`.
    INT16 = INT, 16;
    /// `int32`.
    INT32 = INT, 32;
    /// `int64`.
    INT64 = INT, 64;
    /// `uint8`.
    UINT8 = UINT, 8;
    /// `uint16`.
    UINT16 = UINT, 16;
    /// `uint32`.
    UINT32 = UINT, 32;
    /// `uint64`.
    UINT64 = UINT, 64;
    /// `float16` (IEEE half).
    FLOAT16 = FLOAT, 16;
    /// `float32`.
    FLOAT32 = FLOAT, 32;
    /// `float64`.
    FLOAT64 = FLOAT, 64;
    /// `bfloat16`.
    BFLOAT16 = BFLOAT, 16;
    /// `complex64` (two float32).
    COMPLEX64 = COMPLEX, 64;
    /// `complex128` (two float64).
    COMPLEX128 = COMPLEX, 128;
    /// `bool`, stored in 8 bits.
    BOOL = BOOL, 8;
    /// `float8_e3m4`.
    FLOAT8_E3M4 = FLOAT8_E3M4, 8;
    /// `float8_e4m3`.
    FLOAT8_E4M3 = FLOAT8_E4M3, 8;
    /// `float8_e4m3b11fnuz`.
    FLOAT8_E4M3B11FNUZ = FLOAT8_E4M3B11FNUZ, 8;
    /// `float8_e4m3fn`.
    FLOAT8_E4M3FN = FLOAT8_E4M3FN, 8;
    /// `float8_e4m3fnuz`.
    FLOAT8_E4M3FNUZ = FLOAT8_E4M3FNUZ, 8;
    /// `float8_e5m2`.
    FLOAT8_E5M2 = FLOAT8_E5M2, 8;
    /// `float8_e5m2fnuz`.
    FLOAT8_E5M2FNUZ = FLOAT8_E5M2FNUZ, 8;
    /// `float8_e8m0fnu`.
    FLOAT8_E8M0FNU = FLOAT8_E8M0FNU, 8;
    /// `float6_e2m3fn` (packed sub-byte).
    FLOAT6_E2M3FN = FLOAT6_E2M3FN, 6;
    /// `float6_e3m2fn` (packed sub-byte).
    FLOAT6_E3M2FN = FLOAT6_E3M2FN, 6;
    /// `float4_e2m1fn`, JAX's convention: one 4-bit lane per element, packed.
    FLOAT4_E2M1FN = FLOAT4_E2M1FN, 4;
    /// `bcomplex32` (two bfloat16; dlpack main after 1.3).
    BCOMPLEX32 = BCOMPLEX, 32;
}

impl DataType {
    /// PyTorch's `float4_e2m1fn_x2`: two 4-bit lanes per element, one byte per element.
    pub const FLOAT4_E2M1FN_X2: Self = Self::new(TypeCode::FLOAT4_E2M1FN, 4, 2);

    /// Builds a data type; nothing is checked until [`validate`](Self::validate).
    pub const fn new(code: TypeCode, bits: u8, lanes: u16) -> Self {
        Self { code, bits, lanes }
    }

    /// Whether [`validate`](Self::validate) accepts this type, without building an error.
    #[inline]
    pub(crate) const fn is_valid(self) -> bool {
        self.fault().is_none()
    }

    /// The first rule of [`validate`](Self::validate) this type breaks, if any (plain data, so
    /// that tables can be built from it at compile time).
    const fn fault(self) -> Option<DtypeFault> {
        let code = self.code;
        if !code.is_known() {
            return Some(DtypeFault::UnknownCode);
        }
        if self.lanes == 0 {
            return Some(DtypeFault::Lanes("lanes must be at least 1"));
        }
        let expected: Option<&'static str> = match code {
            // Widths some producer really sends: sub-byte integers (int1..int7, uint1..uint7:
            // PyTorch, TVM) and the machine widths. No consumer reads an int12 or a float7.
            TypeCode::INT | TypeCode::UINT => match self.bits {
                1..=8 | 16 | 32 | 64 => None,
                _ => Some("1 to 8, 16, 32 or 64"),
            },
            // IEEE binary16/32/64. NumPy never sends its long double (float128 is x87
            // extended precision padded to 16 bytes, not IEEE: NumPy's __dlpack__ refuses it);
            // 8-bit floats have their own type codes (7..=14).
            TypeCode::FLOAT => match self.bits {
                16 | 32 | 64 => None,
                _ => Some("16, 32 or 64 (8-bit floats use the float8 type codes)"),
            },
            TypeCode::OPAQUE_HANDLE => {
                if self.bits == 0 || self.bits % 8 != 0 {
                    Some("a non-zero multiple of 8")
                } else {
                    None
                }
            }
            TypeCode::BFLOAT => {
                if self.bits != 16 {
                    Some("16")
                } else {
                    None
                }
            }
            // complex32 (PyTorch's chalf), complex64, complex128: two IEEE halves each.
            TypeCode::COMPLEX => match self.bits {
                32 | 64 | 128 => None,
                _ => Some("32, 64 or 128"),
            },
            // Two bfloat16 halves.
            TypeCode::BCOMPLEX => match self.bits {
                32 => None,
                _ => Some("32"),
            },
            TypeCode::BOOL => {
                if self.bits != 8 {
                    Some("8")
                } else {
                    None
                }
            }
            TypeCode::FLOAT6_E2M3FN | TypeCode::FLOAT6_E3M2FN => {
                if self.bits != 6 {
                    Some("6")
                } else {
                    None
                }
            }
            TypeCode::FLOAT4_E2M1FN => {
                if self.bits != 4 {
                    Some("4")
                } else {
                    None
                }
            }
            // Every fp8 code.
            _ => {
                if self.bits != 8 {
                    Some("8")
                } else {
                    None
                }
            }
        };
        if let Some(expected) = expected {
            return Some(DtypeFault::Bits(expected));
        }
        if self.bits < 8
            && self.lanes != 1
            && !(code.0 == TypeCode::FLOAT4_E2M1FN.0 && self.lanes == 2)
        {
            return Some(DtypeFault::Lanes(
                "sub-byte types take lanes = 1 (fp4 also takes 2, PyTorch's _x2)",
            ));
        }
        None
    }

    /// For a valid scalar type of 8, 16, 32, 64 or 128 bits, `log2` of its size in bytes (0 to
    /// 4); `None` for anything else (invalid, sub-byte, vector or odd-width types), which the
    /// full rules then judge. Two table lookups, the tables built at compile time from
    /// [`validate`](Self::validate)'s own rules, so the two cannot disagree: the import fast
    /// path.
    #[inline(always)]
    pub(crate) const fn whole_byte_log2(self) -> Option<u32> {
        let width = WIDTH_OF_BITS[self.bits as usize] as u32;
        if self.lanes != 1 || (BYTE_WIDTHS[self.code.0 as usize] >> width) & 1 == 0 {
            return None;
        }
        // Bit 0 of BYTE_WIDTHS is never set, so `width ≥ 1` here.
        Some(width - 1)
    }

    /// Whether one lane is narrower than a byte (int4, fp6, fp4, …).
    pub const fn is_sub_byte(self) -> bool {
        self.bits < 8
    }

    /// Bits one element occupies in memory: `bits × lanes` when packed, whole bytes otherwise.
    ///
    /// Sub-byte types are packed (little bit-endian) unless the producer set
    /// `IS_SUBBYTE_TYPE_PADDED`; wider types always occupy `ceil(bits × lanes / 8)` bytes.
    #[inline]
    pub const fn storage_bits(self, subbyte_padded: bool) -> u32 {
        let raw = self.bits as u32 * self.lanes as u32;
        if self.is_sub_byte() && !subbyte_padded {
            raw
        } else {
            raw.div_ceil(8) * 8
        }
    }

    /// Bytes of one element when it occupies whole bytes (`ceil(bits × lanes / 8)`), as in
    /// dlpack.h's `GetDataSize`.
    pub const fn size_bytes(self) -> usize {
        (self.bits as usize * self.lanes as usize).div_ceil(8)
    }

    /// Bytes that `numel` elements occupy compactly (packed sub-byte types round up to a byte).
    /// `None` on overflow.
    pub const fn bytes_for(self, numel: u64, subbyte_padded: bool) -> Option<u64> {
        match numel.checked_mul(self.storage_bits(subbyte_padded) as u64) {
            Some(bits) => Some(bits.div_ceil(8)),
            None => None,
        }
    }

    /// The fp4 type in the given convention.
    pub const fn float4_e2m1fn(convention: Fp4Convention) -> Self {
        match convention {
            Fp4Convention::Packed => Self::FLOAT4_E2M1FN,
            Fp4Convention::X2 => Self::FLOAT4_E2M1FN_X2,
        }
    }

    /// Which fp4 convention this type follows, if it is fp4.
    pub const fn fp4_convention(self) -> Option<Fp4Convention> {
        if self.code.0 != TypeCode::FLOAT4_E2M1FN.0 || self.bits != 4 {
            return None;
        }
        match self.lanes {
            1 => Some(Fp4Convention::Packed),
            2 => Some(Fp4Convention::X2),
            _ => None,
        }
    }

    /// The name base of a code whose names carry the bit width (`int`, `float`, …).
    const fn width_named(code: TypeCode) -> Option<&'static str> {
        match code {
            TypeCode::INT => Some("int"),
            TypeCode::UINT => Some("uint"),
            TypeCode::FLOAT => Some("float"),
            TypeCode::BFLOAT => Some("bfloat"),
            TypeCode::COMPLEX => Some("complex"),
            TypeCode::BCOMPLEX => Some("bcomplex"),
            TypeCode::OPAQUE_HANDLE => Some("handle"),
            _ => None,
        }
    }
}

/// The two fp4 conventions in the wild.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fp4Convention {
    /// JAX / ml_dtypes: `(17, 4, 1)`, elements packed two per byte; shape counts fp4 values.
    Packed,
    /// PyTorch `float4_e2m1fn_x2`: `(17, 4, 2)`, one byte per element holding two values;
    /// shape counts bytes (the last axis is half as long).
    X2,
}

impl fmt::Display for DataType {
    /// `float32`, `bfloat16`, `float8_e4m3fn`, `bool`, `complex64`, `float32x4` (4 lanes),
    /// `float4_e2m1fn_x2`; anything invalid as `dtype(code=99, bits=8, lanes=1)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.validate().is_err() {
            return write!(
                f,
                "dtype(code={}, bits={}, lanes={})",
                self.code.0, self.bits, self.lanes
            );
        }
        if let Some(base) = Self::width_named(self.code) {
            write!(f, "{base}{}", self.bits)?;
            if self.lanes != 1 {
                write!(f, "x{}", self.lanes)?;
            }
            return Ok(());
        }
        // Named codes: bool, fp8, fp6, fp4 (their width is fixed by validate()).
        f.write_str(self.code.short_name().unwrap_or("?"))?;
        if self.lanes != 1 {
            write!(f, "_x{}", self.lanes)?;
        }
        Ok(())
    }
}

impl fmt::Debug for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust type that is exactly one element of a DLPack data type.
///
/// Sealed: implemented for the integer and float primitives, [`half::f16`], [`half::bf16`],
/// [`Complex32`], [`Complex64`] and [`Bool8`]. Every implementor is `bytemuck::Pod`, so any bit
/// pattern a producer wrote is a valid value (that is why Rust's `bool` is not one: DLPack
/// `bool` bytes other than 0 and 1 exist in the wild).
pub trait Element: bytemuck::Pod + Send + Sync + sealed::Sealed {
    /// The DLPack type of this Rust type.
    const DTYPE: DataType;
}

macro_rules! element {
    ($($t:ty => $dt:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t { const DTYPE: DataType = DataType::$dt; }
    )*};
}

element! {
    i8 => INT8, i16 => INT16, i32 => INT32, i64 => INT64,
    u8 => UINT8, u16 => UINT16, u32 => UINT32, u64 => UINT64,
    f32 => FLOAT32, f64 => FLOAT64,
    half::f16 => FLOAT16, half::bf16 => BFLOAT16,
    Complex32 => COMPLEX64, Complex64 => COMPLEX128,
    Bool8 => BOOL,
}

/// A `complex64` element: two `f32`, real part first (C's `float _Complex`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Zeroable, bytemuck::Pod)]
pub struct Complex32 {
    /// Real part.
    pub re: f32,
    /// Imaginary part.
    pub im: f32,
}

/// A `complex128` element: two `f64`, real part first (C's `double _Complex`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Zeroable, bytemuck::Pod)]
pub struct Complex64 {
    /// Real part.
    pub re: f64,
    /// Imaginary part.
    pub im: f64,
}

/// A DLPack `bool` element: one byte, where any non-zero value means true.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, bytemuck::Zeroable, bytemuck::Pod)]
pub struct Bool8(pub u8);

impl Bool8 {
    /// The truth value (any non-zero byte is true).
    pub const fn get(self) -> bool {
        self.0 != 0
    }
}

impl From<bool> for Bool8 {
    fn from(b: bool) -> Self {
        Self(u8::from(b))
    }
}

impl From<Bool8> for bool {
    fn from(b: Bool8) -> Self {
        b.get()
    }
}
