//! The names dlport-native's backends register under, in a room of their own: the CUDA backend
//! makes tensors of the pinned backend (a device-to-host copy lands in pinned memory), and the
//! pinned backend allocates through CUDA, so neither may take the other's name from its room.

/// The CUDA backend's name (`kDLCUDA`, `kDLCUDAManaged`).
#[cfg(feature = "cuda")]
pub(crate) const CUDA: &str = "cuda";

/// The pinned backend's name (`kDLCUDAHost`).
pub(crate) const PINNED: &str = "pinned";
