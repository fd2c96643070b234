//! A device with streams, as a test sees one: host memory labelled `kDLVulkan` (a type DLPack
//! gives no stream numbering, so streams are handles) and [`Streams`], a backend for it that
//! records every stream hand-off it is asked for (`Backend::stream_hand_off`), or fails them.
//! dlport-core's tests drive it through `Registry`, dlport-capi's through the C entries.

use std::sync::Mutex;

use dlport_core::abi::DeviceType;
use dlport_core::backend::{Backend, StreamRequest};
use dlport_core::error::BackendError;
use dlport_core::{Device, Error};

/// The device the fake backend serves: `kDLVulkan` 0 (host memory under that label).
pub const FAKE: Device = Device::new(DeviceType::VULKAN, 0);

/// One recorded hand-off: the tensor's memory, the producer's stream, the consumer's request.
pub type HandOff = (Device, Option<usize>, StreamRequest);

/// The backend of [`FAKE`]: records each hand-off; with `fail`, refuses each after recording it.
#[derive(Debug, Default)]
pub struct Streams {
    calls: Mutex<Vec<HandOff>>,
    fail: bool,
}

impl Streams {
    /// A backend that records hand-offs and accepts them (`fail` false) or refuses them.
    pub fn new(fail: bool) -> Self {
        Self {
            calls: Mutex::new(Vec::new()),
            fail,
        }
    }

    /// The hand-offs asked so far, oldest first.
    pub fn calls(&self) -> Vec<HandOff> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Backend for Streams {
    fn name(&self) -> &'static str {
        "streams"
    }
    fn device_types(&self) -> &[DeviceType] {
        &[DeviceType::VULKAN]
    }
    fn can_access(&self, memory: Device) -> bool {
        memory.device_type == DeviceType::VULKAN
    }
    fn stream_hand_off(
        &self,
        memory: Device,
        producer: Option<usize>,
        consumer: StreamRequest,
    ) -> Result<(), Error> {
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((memory, producer, consumer));
        if self.fail {
            return Err(Error::Backend(BackendError::unsupported(
                "streams",
                "a hand-off",
            )));
        }
        Ok(())
    }
}
