//! The DLPack stream argument of `__dlpack__(stream=…)`, parsed per device type.

use core::fmt;

use crate::abi::DeviceType;
use crate::error::{DispatchError, Error, StreamReason};

/// What a consumer asked for with `__dlpack__(stream=…)`, once checked against the device type.
///
/// CUDA: `None` or 1 is the legacy default stream, 2 the per-thread default stream, any value
/// above 2 a `cudaStream_t`, -1 "do not synchronise"; 0 is invalid (ambiguous). ROCm: `None` or
/// 0 is the default stream, above 2 a `hipStream_t`, -1 no synchronisation; 1 and 2 are invalid.
/// Host memory: only `None` (or -1).
///
/// ```
/// use dlport_core::abi::DeviceType;
/// use dlport_core::backend::StreamRequest;
/// assert_eq!(StreamRequest::parse(Some(2), DeviceType::CUDA).unwrap(), StreamRequest::PerThreadDefault);
/// assert!(StreamRequest::parse(Some(0), DeviceType::CUDA).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamRequest {
    /// The legacy default stream (CUDA `cudaStreamLegacy`, handle value 1; ROCm stream 0).
    LegacyDefault,
    /// The per-thread default stream (CUDA `cudaStreamPerThread`, handle value 2).
    PerThreadDefault,
    /// A stream handle.
    Stream(usize),
    /// The consumer synchronises itself: the producer must not.
    NoSync,
}

impl StreamRequest {
    /// Parses the `stream` argument for memory of `device_type`.
    pub fn parse(stream: Option<i64>, device_type: DeviceType) -> Result<Self, Error> {
        let bad = |reason: StreamReason| {
            Error::Dispatch(DispatchError::InvalidStream {
                stream: stream.unwrap_or(i64::MIN),
                device_type,
                reason,
            })
        };
        match device_type {
            DeviceType::CUDA | DeviceType::CUDA_MANAGED => match stream {
                None | Some(1) => Ok(Self::LegacyDefault),
                Some(2) => Ok(Self::PerThreadDefault),
                Some(-1) => Ok(Self::NoSync),
                Some(0) => Err(bad(StreamReason::CudaZero)),
                Some(s) if s > 2 => usize::try_from(s)
                    .map(Self::Stream)
                    .map_err(|_| bad(StreamReason::NotAPointer)),
                Some(_) => Err(bad(StreamReason::Negative)),
            },
            DeviceType::ROCM => match stream {
                None | Some(0) => Ok(Self::LegacyDefault),
                Some(-1) => Ok(Self::NoSync),
                Some(1 | 2) => Err(bad(StreamReason::RocmOneOrTwo)),
                Some(s) if s > 2 => usize::try_from(s)
                    .map(Self::Stream)
                    .map_err(|_| bad(StreamReason::NotAPointer)),
                Some(_) => Err(bad(StreamReason::Negative)),
            },
            t if crate::device::MemoryClass::of(t).is_host_accessible() => match stream {
                None | Some(-1) => Ok(Self::NoSync),
                Some(_) => Err(bad(StreamReason::HostMemory)),
            },
            // Other devices define no stream numbering in DLPack: pass handles through.
            _ => match stream {
                None => Ok(Self::LegacyDefault),
                Some(-1) => Ok(Self::NoSync),
                Some(s) if s > 0 => usize::try_from(s)
                    .map(Self::Stream)
                    .map_err(|_| bad(StreamReason::NotAPointer)),
                Some(_) => Err(bad(StreamReason::NotAHandle)),
            },
        }
    }

    /// The raw handle to pass to the driver (CUDA's `CU_STREAM_LEGACY` = 1 and
    /// `CU_STREAM_PER_THREAD` = 2 are handle values), or `None` for [`NoSync`](Self::NoSync).
    pub const fn cuda_handle(self) -> Option<usize> {
        match self {
            Self::LegacyDefault => Some(1),
            Self::PerThreadDefault => Some(2),
            Self::Stream(s) => Some(s),
            Self::NoSync => None,
        }
    }
}

impl fmt::Display for StreamRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::LegacyDefault => f.write_str("legacy default stream"),
            Self::PerThreadDefault => f.write_str("per-thread default stream"),
            Self::Stream(s) => write!(f, "stream {s:#x}"),
            Self::NoSync => f.write_str("no synchronisation"),
        }
    }
}
