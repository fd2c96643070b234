//! The process's allocation limit through every Rust door of core: the registry's allocation
//! (`Registry::allocate`, `allocate_on`), a backend asked directly (`Backend::allocate`,
//! `CpuBackend::zeros`), and a copy. The limit is process-wide, so this binary is its own and
//! its tests take `LIMIT` in turn, restoring the limit and the default they found.

use std::sync::{Mutex, MutexGuard, PoisonError};

use dlport_core::backend::{CompactOptions, CpuBackend, set_default_alloc_limit};
use dlport_core::error::{DispatchError, OptionRule};
use dlport_core::{
    CopyPolicy, DataType, Device, Error, ExportBuilder, ExportOptions, ImportOptions, Registry,
    set_alloc_limit,
};

const MIB: u64 = 1 << 20;
/// 4 MiB of uint8.
const SHAPE: [i64; 1] = [4 << 20];

static LIMIT: Mutex<()> = Mutex::new(());

/// Holds the process limit for one test; restores the user's limit (none) and core's default
/// (`isize::MAX`) when dropped, also when the test fails.
struct Held(#[allow(dead_code)] MutexGuard<'static, ()>);

fn hold() -> Held {
    Held(LIMIT.lock().unwrap_or_else(PoisonError::into_inner))
}

impl Drop for Held {
    fn drop(&mut self) {
        set_alloc_limit(0);
        set_default_alloc_limit(u64::MAX);
    }
}

fn refused_with(limit: u64) -> impl Fn(Result<dlport_core::Tensor, Error>) {
    move |r| match r {
        Err(Error::Dispatch(DispatchError::AllocationLimit { bytes, limit: l })) => {
            // 4 MiB, and for a page-aligned allocation the page it may take more.
            assert_eq!(l, limit);
            assert!(
                (4 << 20..(4 << 20) + 4096).contains(&bytes.get()),
                "{bytes}"
            );
        }
        other => panic!("expected AllocationLimit at {limit}, got {other:?}"),
    }
}

/// Every way core allocates 4 MiB on the host.
fn every_door(r: &Registry) -> [Result<dlport_core::Tensor, Error>; 5] {
    let cpu = Device::cpu();
    [
        r.allocate(cpu, DataType::UINT8, &SHAPE),
        r.allocate_on(&CpuBackend, cpu, DataType::UINT8, &SHAPE),
        r.resolve(cpu)
            .unwrap()
            .allocate(cpu, DataType::UINT8, &SHAPE),
        CpuBackend::zeros(DataType::UINT8, &SHAPE),
        CpuBackend::zeros_aligned(DataType::UINT8, &SHAPE, 4096),
    ]
}

#[test]
#[cfg_attr(
    miri,
    ignore = "4 MiB zeroed and read in every door, 1 GiB alignments: too slow under Miri"
)]
fn four_mib_are_refused_under_a_one_mib_limit_in_every_door_and_backend() {
    let _held = hold();
    let r = Registry::with_cpu();
    set_alloc_limit(MIB);
    for got in every_door(&r) {
        refused_with(MIB)(got);
    }
    // A copy, too (one byte broadcast to 4 MiB).
    let src = ExportBuilder::from_vec(vec![1u8], &SHAPE)
        .strides(&[0])
        .build()
        .unwrap();
    let always = ImportOptions {
        copy: CopyPolicy::Always,
        ..ImportOptions::default()
    };
    refused_with(MIB)(r.from_dlpack(src, &always));
    // A registry's own limit lowers it for the registry's allocations.
    set_alloc_limit(0);
    let mut low = Registry::with_cpu();
    low.set_alloc_limit(MIB);
    refused_with(MIB)(low.allocate(Device::cpu(), DataType::UINT8, &SHAPE));
    // Under the limit, every door allocates (zeroed).
    set_alloc_limit(8 * MIB);
    for got in every_door(&r) {
        let t = got.unwrap();
        assert_eq!(t.shape(), SHAPE);
        assert!(t.to_vec::<u8>().unwrap().iter().all(|&b| b == 0));
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "4 MiB zeroed and read in every door, 1 GiB alignments: too slow under Miri"
)]
fn a_limit_raised_above_the_default_is_the_one_in_force_everywhere() {
    let _held = hold();
    // The platform's default (what `dlport_native::install()` gives as the machine's memory),
    // here 1 MiB so that the raise above it can be allocated.
    set_default_alloc_limit(MIB);
    let r = Registry::with_cpu();
    assert_eq!(r.alloc_limit(None), MIB);
    for got in every_door(&r) {
        refused_with(MIB)(got);
    }
    set_alloc_limit(8 * MIB);
    assert_eq!(
        r.alloc_limit(None),
        8 * MIB,
        "the raise holds in the registry"
    );
    for got in every_door(&r) {
        assert_eq!(got.unwrap().shape(), SHAPE);
    }
    let src = ExportBuilder::from_vec(vec![1u8], &SHAPE)
        .strides(&[0])
        .build()
        .unwrap();
    let copied = r
        .from_dlpack(
            src,
            &ImportOptions {
                copy: CopyPolicy::Always,
                ..ImportOptions::default()
            },
        )
        .unwrap();
    assert_eq!(copied.shape(), SHAPE);
    // Restored, the default is in force again.
    set_alloc_limit(0);
    refused_with(MIB)(r.allocate(Device::cpu(), DataType::UINT8, &SHAPE));
}

#[test]
fn zero_is_none_of_its_own_and_never_a_zero_byte_limit() {
    let _held = hold();
    set_alloc_limit(MIB);
    // A registry's 0 is none of its own: the process's limit holds.
    let mut r = Registry::with_cpu();
    r.set_alloc_limit(0);
    assert_eq!(r.alloc_limit(None), MIB);
    assert!(r.allocate(Device::cpu(), DataType::UINT8, &[16]).is_ok());
    // A call's max_alloc of 0 is refused by name in every registry operation, a view included.
    let zero = Error::Dispatch(DispatchError::InvalidOption {
        rule: OptionRule::MaxAlloc,
        value: 0,
    });
    let src = || ExportBuilder::from_vec(vec![1u8; 4], &[4]).build().unwrap();
    let err = r
        .from_dlpack(
            src(),
            &ImportOptions {
                max_alloc: Some(0),
                ..ImportOptions::default()
            },
        )
        .unwrap_err();
    assert_eq!(err, zero);
    assert!(err.to_string().contains("max_alloc = 0"), "{err}");
    let t = r.from_dlpack(src(), &ImportOptions::default()).unwrap();
    let export = ExportOptions {
        max_alloc: Some(0),
        ..ExportOptions::versioned()
    };
    assert_eq!(r.to_dlpack(&t, &export).unwrap_err(), zero);
    let compact = CompactOptions {
        max_alloc: Some(0),
        ..CompactOptions::default()
    };
    assert_eq!(r.compact(&t, &compact).unwrap_err(), zero);
    assert_eq!(
        dlport_core::backend::check_alloc(0, Some(0)).unwrap_err(),
        zero
    );
    // set_alloc_limit(0) is the default again.
    assert_eq!(set_alloc_limit(0), MIB);
    assert_eq!(r.alloc_limit(None), isize::MAX as u64);
}

/// Bytes the limit counts for a 2-byte copy aligned to 2^30: the 64-byte-aligned copy and the
/// aligned one, which can take 2 + 2^30 - 1 bytes of address space.
const ALIGNED_COPY: u128 = 2 + 2 + (1 << 30) - 1;

#[test]
#[cfg_attr(
    miri,
    ignore = "4 MiB zeroed and read in every door, 1 GiB alignments: too slow under Miri"
)]
fn an_aligned_allocation_counts_what_it_can_take_not_only_its_bytes() {
    let _held = hold();
    let r = Registry::with_cpu();
    let align = 1usize << 30;
    // Two bytes, strided: a compaction copies them.
    let two = || {
        ExportBuilder::from_vec(vec![1u8, 0, 2], &[2])
            .strides(&[2])
            .build()
            .unwrap()
    };
    let t = r.from_dlpack(two(), &ImportOptions::default()).unwrap();
    let aligned = CompactOptions {
        alignment: Some(align),
        ..CompactOptions::default()
    };
    let over = |limit: u64| {
        Error::Dispatch(DispatchError::AllocationLimit {
            bytes: ALIGNED_COPY.into(),
            limit,
        })
    };
    set_alloc_limit(MIB);
    // Eight times over, as the attack did: each refused before anything is reserved.
    for _ in 0..8 {
        assert_eq!(r.compact(&t, &aligned).unwrap_err(), over(MIB));
    }
    let import = ImportOptions {
        requirements: Some(dlport_core::backend::ViewRequirements {
            layout: dlport_core::backend::LayoutNeed::Any,
            alignment: align,
        }),
        ..ImportOptions::default()
    };
    assert_eq!(r.from_dlpack(two(), &import).unwrap_err(), over(MIB));
    // A call's limit counts it the same way.
    set_alloc_limit(0);
    let capped = CompactOptions {
        max_alloc: Some(1 << 30),
        ..aligned
    };
    assert_eq!(r.compact(&t, &capped).unwrap_err(), over(1 << 30));
    // An aligned allocation of the backend, asked directly.
    set_alloc_limit(MIB);
    assert!(matches!(
        CpuBackend::zeros_aligned(DataType::UINT8, &[2], align),
        Err(Error::Dispatch(DispatchError::AllocationLimit { bytes, limit: MIB }))
            if bytes.get() == 2 + (1 << 30) - 1
    ));
    // Within the limit the copy is made, aligned as asked.
    set_alloc_limit(4 << 30);
    let c = r.compact(&t, &aligned).unwrap();
    assert_eq!(c.first_element_address().unwrap() % align, 0);
    assert_eq!(c.to_vec::<u8>().unwrap(), [1, 2]);
    let z = CpuBackend::zeros_aligned(DataType::UINT8, &[2], align).unwrap();
    assert_eq!(z.first_element_address().unwrap() % align, 0);
    // Alignments up to 64 bytes count the bytes alone.
    set_alloc_limit(2);
    assert!(CpuBackend::zeros_aligned(DataType::UINT8, &[2], 64).is_ok());
}
