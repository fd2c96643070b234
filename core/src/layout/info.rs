//! [`TensorInfo`]: an owned, serialisable description of a tensor's metadata (made from a
//! validated view: `From<&TensorRef>` is implemented beside [`TensorRef`](crate::TensorRef)).

use alloc::vec::Vec;

use super::summary::{ByteSpan, Contiguity};
use crate::abi::DLPackVersion;
use crate::device::Device;
use crate::dtype::DataType;

/// Everything about a tensor except its data, owned. With the `serde` feature it serialises
/// (the data type and device as their names: `"float32"`, `"cuda:0"`) and deserialises back.
///
/// # Examples
///
/// ```
/// use dlport_core::ExportBuilder;
/// use dlport_core::layout::TensorInfo;
/// let t = ExportBuilder::from_vec(vec![0u8; 6], &[2, 3]).build()?;
/// let info = TensorInfo::from(&t.view());
/// assert_eq!(info.shape, [2, 3]);
/// assert_eq!(info.strides, [3, 1]);
/// assert_eq!(info.dtype.to_string(), "uint8");
/// # Ok::<(), dlport_core::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct TensorInfo {
    /// Extents.
    pub shape: Vec<i64>,
    /// Strides in elements (computed when the producer sent NULL).
    pub strides: Vec<i64>,
    /// Element type.
    pub dtype: DataType,
    /// Device.
    pub device: Device,
    /// Bytes from `data` to the first element.
    pub byte_offset: u64,
    /// Versioned flags (0 for legacy).
    pub flags: u64,
    /// DLPack version (`None` for legacy).
    pub version: Option<DLPackVersion>,
    /// Number of elements.
    pub numel: u64,
    /// Layout class.
    pub contiguity: Contiguity,
    /// Bytes touched, relative to the first element.
    pub byte_span: ByteSpan,
}

#[cfg(feature = "serde")]
mod serde_impls {
    use alloc::string::String;
    use core::str::FromStr;

    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::abi::DLPackVersion;
    use crate::device::Device;
    use crate::dtype::DataType;
    use crate::layout::summary::{ByteSpan, Contiguity};

    macro_rules! by_name {
        ($($t:ty),*) => {$(
            impl Serialize for $t {
                fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                    s.collect_str(self)
                }
            }
            impl<'de> Deserialize<'de> for $t {
                fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                    let text = String::deserialize(d)?;
                    <$t>::from_str(&text).map_err(D::Error::custom)
                }
            }
        )*};
    }
    by_name!(DataType, Device);

    #[derive(Serialize, Deserialize)]
    struct VersionRepr {
        major: u32,
        minor: u32,
    }

    impl Serialize for DLPackVersion {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            VersionRepr {
                major: self.major,
                minor: self.minor,
            }
            .serialize(s)
        }
    }
    impl<'de> Deserialize<'de> for DLPackVersion {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let v = VersionRepr::deserialize(d)?;
            Ok(DLPackVersion::new(v.major, v.minor))
        }
    }

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum ContiguityRepr {
        Both,
        RowMajor,
        ColumnMajor,
        Permuted,
        Strided,
    }

    impl Serialize for Contiguity {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            match self {
                Contiguity::Both => ContiguityRepr::Both,
                Contiguity::RowMajor => ContiguityRepr::RowMajor,
                Contiguity::ColumnMajor => ContiguityRepr::ColumnMajor,
                Contiguity::Permuted => ContiguityRepr::Permuted,
                Contiguity::Strided => ContiguityRepr::Strided,
            }
            .serialize(s)
        }
    }
    impl<'de> Deserialize<'de> for Contiguity {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            Ok(match ContiguityRepr::deserialize(d)? {
                ContiguityRepr::Both => Contiguity::Both,
                ContiguityRepr::RowMajor => Contiguity::RowMajor,
                ContiguityRepr::ColumnMajor => Contiguity::ColumnMajor,
                ContiguityRepr::Permuted => Contiguity::Permuted,
                ContiguityRepr::Strided => Contiguity::Strided,
            })
        }
    }

    impl Serialize for ByteSpan {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            [self.lo, self.hi].serialize(s)
        }
    }
    impl<'de> Deserialize<'de> for ByteSpan {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let [lo, hi] = <[i64; 2]>::deserialize(d)?;
            Ok(ByteSpan { lo, hi })
        }
    }
}
