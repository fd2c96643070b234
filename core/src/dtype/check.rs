//! The fallible half of [`DataType`]: [`DataType::validate`] and parsing a name, both
//! answering with dlport's errors (the type itself, below the errors, names none).

use core::str::FromStr;

use super::{DataType, DtypeFault};
use crate::abi::TypeCode;
use crate::error::{DispatchError, Error, LayoutError, NameKind, ShortStr};

impl DtypeFault {
    #[cold]
    const fn error(self, dtype: DataType) -> Error {
        Error::Layout(match self {
            Self::UnknownCode => LayoutError::UnknownTypeCode { code: dtype.code },
            Self::Bits(expected) => LayoutError::InvalidBits { dtype, expected },
            Self::Lanes(reason) => LayoutError::InvalidLanes { dtype, reason },
        })
    }
}

impl DataType {
    /// Checks the DLPack rules for this type: a known code, non-zero lanes, and the bit width
    /// each code demands (fp8 = 8, fp6 = 6, fp4 = 4, bool = 8, bfloat = 16, complex an even
    /// multiple of 8, others a non-zero width). fp4 accepts lanes 1 (JAX) and 2 (PyTorch's
    /// `_x2`); other sub-byte types need lanes = 1.
    #[inline]
    pub const fn validate(self) -> Result<(), Error> {
        match self.fault() {
            None => Ok(()),
            Some(fault) => Err(fault.error(self)),
        }
    }
}

impl FromStr for DataType {
    type Err = Error;

    /// Parses every name [`Display`](core::fmt::Display) writes, plus the aliases `half`,
    /// `float`, `double`, `bfloat16`, `float4_e2m1fn_x2`. The result is validated.
    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = || {
            Error::Dispatch(DispatchError::InvalidName {
                what: NameKind::DataType,
                name: ShortStr::new(s),
            })
        };
        let parse_u = |t: &str| -> Option<u64> {
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            t.parse().ok()
        };
        let dt = if let Some(body) = s.strip_prefix("dtype(").and_then(|r| r.strip_suffix(')')) {
            let mut it = body.split(',').map(str::trim);
            let mut field = |key: &str| {
                it.next()
                    .and_then(|kv| kv.strip_prefix(key))
                    .and_then(&parse_u)
            };
            let (code, bits, lanes) = (field("code="), field("bits="), field("lanes="));
            match (code, bits, lanes) {
                (Some(c), Some(b), Some(l)) if c <= 255 && b <= 255 && l <= 65535 => {
                    Self::new(TypeCode(c as u8), b as u8, l as u16)
                }
                _ => return Err(bad()),
            }
        } else {
            match s {
                "half" => Self::FLOAT16,
                "float" => Self::FLOAT32,
                "double" => Self::FLOAT64,
                _ => parse_name(s).ok_or_else(bad)?,
            }
        };
        // A name that parses must also be a valid type (e.g. "float8_e4m3fn_x3" is not).
        if s.starts_with("dtype(") {
            return Ok(dt);
        }
        dt.validate().map(|()| dt).map_err(|_| bad())
    }
}

fn parse_name(s: &str) -> Option<DataType> {
    fn number(t: &str) -> Option<u64> {
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        t.parse().ok()
    }
    // Named codes (bool, fp8, fp6, fp4), with an optional "_xN" lane suffix.
    for &code in TypeCode::ALL_KNOWN {
        if DataType::width_named(code).is_some() {
            continue;
        }
        let Some(name) = code.short_name() else {
            continue;
        };
        let Some(rest) = s.strip_prefix(name) else {
            continue;
        };
        let lanes = if rest.is_empty() {
            1
        } else {
            match rest.strip_prefix("_x").and_then(number) {
                Some(lanes) => lanes,
                None => continue,
            }
        };
        let bits = match code {
            TypeCode::BOOL => 8,
            TypeCode::FLOAT6_E2M3FN | TypeCode::FLOAT6_E3M2FN => 6,
            TypeCode::FLOAT4_E2M1FN => 4,
            _ => 8,
        };
        return Some(DataType::new(code, bits, u16::try_from(lanes).ok()?));
    }
    // Width-named codes: longest base first so "bfloat" wins over "float", "uint" over "int".
    const BASES: [(&str, TypeCode); 7] = [
        ("bcomplex", TypeCode::BCOMPLEX),
        ("complex", TypeCode::COMPLEX),
        ("bfloat", TypeCode::BFLOAT),
        ("handle", TypeCode::OPAQUE_HANDLE),
        ("float", TypeCode::FLOAT),
        ("uint", TypeCode::UINT),
        ("int", TypeCode::INT),
    ];
    for (base, code) in BASES {
        let Some(rest) = s.strip_prefix(base) else {
            continue;
        };
        let (bits, lanes) = match rest.split_once('x') {
            Some((b, l)) => (number(b)?, number(l)?),
            None => (number(rest)?, 1),
        };
        return Some(DataType::new(
            code,
            u8::try_from(bits).ok()?,
            u16::try_from(lanes).ok()?,
        ));
    }
    None
}
