//! The options of an import and an export, as the array API names them: the [`CopyPolicy`],
//! [`ImportOptions`] (`from_dlpack(x, device=, copy=)` plus the consumer's
//! [`ViewRequirements`]) and [`ExportOptions`] (`__dlpack__(max_version=, dl_device=, copy=)`).

use crate::abi::DLPackVersion;
use crate::device::Device;
use crate::error::CopyReason;
use crate::layout::Contiguity;
use crate::view::TensorRef;

/// The array-API `copy` argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum CopyPolicy {
    /// `copy=False`: never copy; fail with [`DispatchError::CopyRequired`](crate::DispatchError::CopyRequired) if a copy would be
    /// needed.
    Never,
    /// `copy=None`: copy only if needed.
    #[default]
    IfNeeded,
    /// `copy=True`: always copy (the result has IS_COPIED).
    Always,
}

impl CopyPolicy {
    /// From the array-API argument: `None` → IfNeeded, `Some(true)` → Always,
    /// `Some(false)` → Never.
    pub const fn from_copy(copy: Option<bool>) -> Self {
        match copy {
            None => Self::IfNeeded,
            Some(true) => Self::Always,
            Some(false) => Self::Never,
        }
    }
}

/// How to import: the array-API `from_dlpack(x, device=, copy=)` plus the producer's
/// advertised device and the consumer's own layout needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImportOptions {
    /// The target device; `None` means the data's own device. It obeys [the rule of device
    /// ids](crate::Device#the-rule-of-device-ids) ([`DispatchError::InvalidDevice`](crate::DispatchError::InvalidDevice) otherwise).
    pub device: Option<Device>,
    /// What the producer's `__dlpack_device__` said, if known (checked by the same rule).
    pub advertised: Option<Device>,
    /// The copy policy.
    pub copy: CopyPolicy,
    /// Extra needs of the consumer (layout, alignment), on top of the backend's own. A copy
    /// made for the import meets them too (an alignment above what the backend allocates is
    /// honoured by re-aligning host copies, refused with [`DispatchError::InvalidOption`](crate::DispatchError::InvalidOption)
    /// elsewhere).
    pub requirements: Option<ViewRequirements>,
    /// The most bytes a copy made for this call may allocate (`None`: the registry's limit).
    pub max_alloc: Option<u64>,
}

/// How to export: the array-API `__dlpack__(max_version=, dl_device=, copy=)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExportOptions {
    /// The highest version the consumer understands: `None` or major 0 → legacy
    /// `DLManagedTensor`; major ≥ 1 → `DLManagedTensorVersioned` 1.3.
    pub max_version: Option<DLPackVersion>,
    /// The device the consumer wants; `None` means the tensor's own. It obeys [the rule of
    /// device ids](crate::Device#the-rule-of-device-ids) ([`DispatchError::InvalidDevice`](crate::DispatchError::InvalidDevice)
    /// otherwise).
    pub dl_device: Option<Device>,
    /// The copy policy.
    pub copy: CopyPolicy,
    /// The most bytes a copy made for this call may allocate (`None`: the registry's limit).
    pub max_alloc: Option<u64>,
}

impl ExportOptions {
    /// What a DLPack 1.x consumer asks for: a versioned (1.3) tensor on its own device, copied
    /// only if needed.
    pub const fn versioned() -> Self {
        Self {
            max_version: Some(DLPackVersion::CURRENT),
            dl_device: None,
            copy: CopyPolicy::IfNeeded,
            max_alloc: None,
        }
    }
}

/// The largest alignment an import may ask for (1 GiB).
pub const MAX_ALIGNMENT: usize = 1 << 30;

/// What a backend needs before it can view foreign memory without a copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ViewRequirements {
    /// The layouts it can view.
    pub layout: LayoutNeed,
    /// The alignment it needs for the first element (1 = none). JAX/XLA needs 64 on the CPU.
    pub alignment: usize,
}

impl ViewRequirements {
    /// Any layout, any alignment.
    pub const ANY: Self = Self {
        layout: LayoutNeed::Any,
        alignment: 1,
    };

    /// The first reason (layout, then alignment) why `view` does not meet these requirements.
    pub fn unmet(&self, view: &TensorRef<'_>) -> Option<CopyReason> {
        let contiguity = view.contiguity();
        let layout_ok = match self.layout {
            LayoutNeed::Any => true,
            LayoutNeed::Dense => contiguity.is_dense(),
            LayoutNeed::RowMajor => contiguity.is_row_major(),
        };
        if !layout_ok {
            return Some(CopyReason::Layout { contiguity });
        }
        if self.alignment <= 1 {
            return None;
        }
        match view.first_element_address() {
            Some(address) if view.numel() != 0 && address % self.alignment != 0 => {
                Some(CopyReason::Alignment {
                    address: address.into(),
                    required: u32::try_from(self.alignment).unwrap_or(u32::MAX),
                })
            }
            _ => None,
        }
    }
}

/// Which layouts a backend can view without a copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LayoutNeed {
    /// Any strides, negative and zero included.
    Any,
    /// Dense in some axis order ([`Contiguity::is_dense`]).
    Dense,
    /// Row-major contiguous ([`Contiguity::is_row_major`]).
    RowMajor,
}

impl From<Contiguity> for LayoutNeed {
    fn from(c: Contiguity) -> Self {
        if c.is_row_major() {
            Self::RowMajor
        } else if c.is_dense() {
            Self::Dense
        } else {
            Self::Any
        }
    }
}
