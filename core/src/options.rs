//! The options of an import and an export, as the array API names them: the [`CopyPolicy`],
//! [`ImportOptions`] (`from_dlpack(x, device=, copy=)` plus the consumer's
//! [`ViewRequirements`]), [`ExportOptions`] (`__dlpack__(stream=, max_version=, dl_device=,
//! copy=)`) and [`CompactOptions`] ([`Registry::compact`](crate::Registry::compact)); and the
//! [`Decision`] a registry makes from an import's options, before doing it.

use crate::abi::DLPackVersion;
use crate::device::Device;
use crate::error::CopyReason;
use crate::layout::Contiguity;
use crate::view::TensorRef;

/// The array-API `copy` argument: whether an import or an export may copy, must copy, or must
/// not.
///
/// # Examples
///
/// ```
/// use dlport_core::error::{CopyReason, DispatchError};
/// use dlport_core::{
///     CopyPolicy, Error, ExportBuilder, ExportOptions, ImportOptions, Tensor, from_dlpack,
///     to_dlpack,
/// };
///
/// assert_eq!(CopyPolicy::default(), CopyPolicy::IfNeeded);
/// assert_eq!(CopyPolicy::from_copy(Some(true)), CopyPolicy::Always);
///
/// // Always: the import is a copy, even where a view was possible.
/// let t = Tensor::from_vec(vec![1u8, 2, 3], &[3])?;
/// let always = ImportOptions { copy: CopyPolicy::Always, ..Default::default() };
/// let copied = from_dlpack(to_dlpack(&t, &ExportOptions::default())?, &always)?;
/// assert!(copied.is_copied());
/// assert_ne!(copied.first_element_address(), t.first_element_address());
///
/// // Never: what needs a copy is refused, saying why (a legacy consumer cannot carry
/// // READ_ONLY, so a read-only tensor reaches it only as a copy).
/// let read_only = ExportBuilder::from_vec(vec![1u8], &[1]).read_only(true).build()?;
/// let imported = from_dlpack(read_only, &ImportOptions::default())?;
/// let never = ExportOptions { copy: CopyPolicy::Never, ..ExportOptions::legacy() };
/// let err = to_dlpack(&imported, &never).unwrap_err();
/// assert!(matches!(
///     err,
///     Error::Dispatch(DispatchError::CopyRequired { reason: CopyReason::Flag { .. } })
/// ));
/// # Ok::<(), dlport_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum CopyPolicy {
    /// `copy=False`: never copy; fail with
    /// [`DispatchError::CopyRequired`](crate::error::DispatchError::CopyRequired) if a copy
    /// would be needed.
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
/// advertised device and the consumer's own layout needs. The default is the data's own
/// device, a copy only if needed, no requirements of the consumer's own and the registry's
/// allocation limit.
///
/// # Examples
///
/// ```
/// use dlport_core::backend::{LayoutNeed, ViewRequirements};
/// use dlport_core::{ExportBuilder, ImportOptions, from_dlpack};
///
/// // A transposed (column-major) tensor, imported by a consumer that reads row-major only:
/// // the import is a row-major copy.
/// let t = ExportBuilder::from_vec(vec![1u8, 2, 3, 4, 5, 6], &[3, 2]).strides(&[1, 3]).build()?;
/// let options = ImportOptions {
///     requirements: Some(ViewRequirements { layout: LayoutNeed::RowMajor, alignment: 1 }),
///     ..Default::default()
/// };
/// let imported = from_dlpack(t, &options)?;
/// assert!(imported.is_copied() && imported.contiguity().is_row_major());
/// assert_eq!(imported.to_vec::<u8>()?, [1, 4, 2, 5, 3, 6]);
/// # Ok::<(), dlport_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImportOptions {
    /// The target device; `None` means the data's own device. It obeys [the rule of device
    /// ids](crate::Device#the-rule-of-device-ids)
    /// ([`DispatchError::InvalidDevice`](crate::error::DispatchError::InvalidDevice) otherwise).
    pub device: Option<Device>,
    /// What the producer's `__dlpack_device__` said, if known (checked by the same rule).
    pub advertised: Option<Device>,
    /// The copy policy.
    pub copy: CopyPolicy,
    /// Extra needs of the consumer (layout, alignment), on top of the backend's own. A copy
    /// made for the import meets them too (an alignment above what the backend allocates is
    /// honoured by re-aligning host copies, refused with
    /// [`DispatchError::InvalidOption`](crate::error::DispatchError::InvalidOption) elsewhere).
    pub requirements: Option<ViewRequirements>,
    /// The most bytes a copy made for this call may allocate (`None`: the registry's limit).
    /// It lowers the limit in force, never raises it: the lowest of this, the registry's and
    /// the process's ([`set_alloc_limit`](crate::set_alloc_limit)) holds.
    pub max_alloc: Option<u64>,
}

/// How to export: the array-API `__dlpack__(stream=, max_version=, dl_device=, copy=)`.
///
/// The two forms are spelt out: [`versioned`](Self::versioned) (a `DLManagedTensorVersioned`,
/// DLPack 1.3, what every 1.x consumer takes) and [`legacy`](Self::legacy) (a
/// `DLManagedTensor`, for consumers that predate DLPack 1.0). The default is the versioned
/// form.
///
/// # Examples
///
/// ```
/// use dlport_core::{ExportOptions, Tensor, to_dlpack};
///
/// assert_eq!(ExportOptions::default(), ExportOptions::versioned());
/// let t = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?;
/// assert!(to_dlpack(&t, &ExportOptions::default())?.is_versioned());
/// assert!(!to_dlpack(&t, &ExportOptions::legacy())?.is_versioned());
/// # Ok::<(), dlport_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExportOptions {
    /// The highest version the consumer understands: `None` or major 0 → legacy
    /// `DLManagedTensor`; major ≥ 1 → `DLManagedTensorVersioned` 1.3.
    pub max_version: Option<DLPackVersion>,
    /// The device the consumer wants; `None` means the tensor's own. It obeys [the rule of
    /// device ids](crate::Device#the-rule-of-device-ids)
    /// ([`DispatchError::InvalidDevice`](crate::error::DispatchError::InvalidDevice) otherwise).
    pub dl_device: Option<Device>,
    /// The copy policy.
    pub copy: CopyPolicy,
    /// The most bytes a copy made for this call may allocate (`None`: the registry's limit).
    /// It lowers the limit in force, never raises it: the lowest of this, the registry's and
    /// the process's ([`set_alloc_limit`](crate::set_alloc_limit)) holds.
    pub max_alloc: Option<u64>,
    /// The consumer's stream, as `__dlpack__(stream=)` gives it (`None` is Python's `None`),
    /// read by DLPack's rules for the exported device's type
    /// ([`StreamRequest::parse`](crate::backend::StreamRequest::parse): for CUDA `None` or 1
    /// is the legacy default stream, 2 the per-thread one, -1 no synchronisation, 0 refused;
    /// host memory takes only `None` or -1). The export makes that stream wait for the
    /// tensor's pending work through its backend
    /// ([`Registry::stream_hand_off`](crate::Registry::stream_hand_off)); an invalid value is
    /// [`DispatchError::InvalidStream`](crate::error::DispatchError::InvalidStream), before
    /// anything is exported.
    pub stream: Option<i64>,
}

impl Default for ExportOptions {
    /// [`ExportOptions::versioned`]: what a Rust caller gets unless it names the legacy form.
    fn default() -> Self {
        Self::versioned()
    }
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
            stream: None,
        }
    }

    /// What a consumer that predates DLPack 1.0 asks for (`max_version` unset): a legacy
    /// `DLManagedTensor` on its own device, copied only if needed. The legacy form has no
    /// flags: a read-only or padded sub-byte tensor reaches it only as a copy.
    pub const fn legacy() -> Self {
        Self {
            max_version: None,
            dl_device: None,
            copy: CopyPolicy::IfNeeded,
            max_alloc: None,
            stream: None,
        }
    }
}

/// How to compact ([`Registry::compact`](crate::Registry::compact)): the alignment of the first
/// element, the copy policy and the allocation limit of the call. The default is a 64-byte
/// alignment in host memory ([`CPU_ALIGN`](crate::backend::CPU_ALIGN); none on a device), a
/// copy only if needed and the registry's limit.
///
/// # Examples
///
/// ```
/// use dlport_core::backend::CompactOptions;
/// use dlport_core::{ExportBuilder, ImportOptions, Registry, from_dlpack};
///
/// // A transposed tensor: its compact form is a row-major copy.
/// let t = ExportBuilder::from_vec(vec![1u8, 2, 3, 4, 5, 6], &[3, 2]).strides(&[1, 3]).build()?;
/// let t = from_dlpack(t, &ImportOptions::default())?;
/// let compact = Registry::process_default().compact(&t, &CompactOptions::default())?;
/// assert!(compact.is_copied() && compact.contiguity().is_row_major());
/// assert_eq!(compact.to_vec::<u8>()?, [1, 4, 2, 5, 3, 6]);
/// # Ok::<(), dlport_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactOptions {
    /// The alignment of the first element in bytes: a power of two up to [`MAX_ALIGNMENT`]
    /// ([`check_alignment`]). `None`: [`CPU_ALIGN`](crate::backend::CPU_ALIGN) in
    /// host-accessible memory, 1 on a device (only host copies are re-aligned; a device copy
    /// that misses it is
    /// [`DispatchError::InvalidOption`](crate::error::DispatchError::InvalidOption)).
    pub alignment: Option<usize>,
    /// The copy policy: `IfNeeded` gives the tensor itself when it is already row-major,
    /// packed and aligned; `Always` copies anyway; `Never` refuses a tensor that needs a copy
    /// ([`DispatchError::CopyRequired`](crate::error::DispatchError::CopyRequired) saying why).
    pub copy: CopyPolicy,
    /// The most bytes the copy may allocate (`None`: the registry's limit). It lowers the limit
    /// in force, never raises it: the lowest of this, the registry's and the process's
    /// ([`set_alloc_limit`](crate::set_alloc_limit)) holds.
    pub max_alloc: Option<u64>,
}

/// What a registry decided for an import, before doing it
/// ([`Registry::decide`](crate::Registry::decide)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Where the memory really is (after reconciliation).
    pub memory: Device,
    /// Where the result goes.
    pub target: Device,
    /// The backend that will hold the result.
    pub backend: &'static str,
    /// Why a view is impossible, if it is.
    pub copy_reason: Option<CopyReason>,
    /// Whether a copy will be made.
    pub copies: bool,
}

/// The largest alignment an import may ask for (1 GiB): the one range of every door (Rust, C,
/// Python), checked by [`check_alignment`].
pub const MAX_ALIGNMENT: usize = 1 << 30;

/// An alignment an import or a compaction may ask for: a power of two from 1 to
/// [`MAX_ALIGNMENT`] bytes, else
/// [`DispatchError::InvalidOption`](crate::error::DispatchError::InvalidOption) naming the value
/// ([`OptionRule::Alignment`](crate::error::OptionRule::Alignment)). The one check of every
/// door: the registry's imports, the C ABI's options and Python's `align=` call it.
pub fn check_alignment(alignment: u64) -> Result<usize, crate::Error> {
    match usize::try_from(alignment) {
        Ok(a) if a.is_power_of_two() && a <= MAX_ALIGNMENT => Ok(a),
        _ => Err(crate::Error::Dispatch(
            crate::error::DispatchError::InvalidOption {
                rule: crate::error::OptionRule::Alignment,
                value: alignment,
            },
        )),
    }
}

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
