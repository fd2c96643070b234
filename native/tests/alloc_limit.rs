//! The process's allocation limit through native's doors: the pinned backend (asked directly
//! and through the registry), the installed registry's allocations and copies, and sharing
//! (`share::alloc`, `share` with a copy). The machine's memory is the process's default, in one
//! home: a limit raised above it is the one in force everywhere. The limit is process-wide, so
//! this binary is its own and its tests take `LIMIT` in turn, restoring the limit.

use std::sync::{Mutex, MutexGuard, PoisonError};

use dlport_core::backend::Backend;
use dlport_core::error::DispatchError;
use dlport_core::{
    CopyPolicy, DataType, Device, Error, ExportBuilder, ImportOptions, Registry, Tensor,
    set_alloc_limit,
};
use dlport_native::pinned::PinnedBackend;
use dlport_native::share::{self, ShareOptions};

const MIB: u64 = 1 << 20;

static LIMIT: Mutex<()> = Mutex::new(());

/// Holds the process limit for one test and restores the default (0) when dropped.
struct Held(#[allow(dead_code)] MutexGuard<'static, ()>);

fn hold() -> Held {
    let held = Held(LIMIT.lock().unwrap_or_else(PoisonError::into_inner));
    dlport_native::install().unwrap();
    held
}

impl Drop for Held {
    fn drop(&mut self) {
        set_alloc_limit(0);
    }
}

/// `r` is `AllocationLimit` at `limit`.
fn refused_at<T: std::fmt::Debug>(r: Result<T, Error>, limit: u64, door: &str) {
    match r {
        Err(Error::Dispatch(DispatchError::AllocationLimit { limit: l, .. })) if l == limit => {}
        other => panic!("{door}: expected AllocationLimit at {limit}, got {other:?}"),
    }
}

/// Every native door allocating `n` bytes of uint8 on the host, each with its name.
fn every_door(n: i64) -> Vec<(&'static str, Result<(), Error>)> {
    let r = Registry::process_default();
    let pinned = PinnedBackend::mlock();
    let cpu = Device::cpu();
    let shape = [n];
    let broadcast = || {
        ExportBuilder::from_vec(vec![1u8], &shape)
            .strides(&[0])
            .build()
            .unwrap()
    };
    let always = ImportOptions {
        copy: CopyPolicy::Always,
        ..ImportOptions::default()
    };
    let share_copy = ShareOptions {
        copy: CopyPolicy::Always,
        ..ShareOptions::default()
    };
    let done = |t: Result<Tensor, Error>| t.map(drop);
    vec![
        (
            "Registry::allocate",
            done(r.allocate(cpu, DataType::UINT8, &shape)),
        ),
        (
            "Registry::allocate_on(pinned)",
            done(r.allocate_on(&pinned, cpu, DataType::UINT8, &shape)),
        ),
        (
            "PinnedBackend::allocate",
            done(pinned.allocate(cpu, DataType::UINT8, &shape)),
        ),
        (
            "PinnedBackend::zeros",
            done(pinned.zeros(DataType::UINT8, &shape)),
        ),
        ("registry copy", done(r.from_dlpack(broadcast(), &always))),
        (
            "share::alloc",
            share::alloc(DataType::UINT8, &shape).map(drop),
        ),
        (
            "share (copy)",
            share::share(&broadcast().view(), &share_copy).map(drop),
        ),
    ]
}

#[test]
fn four_mib_are_refused_under_a_one_mib_limit_by_every_native_door() {
    let _held = hold();
    set_alloc_limit(MIB);
    for (door, got) in every_door(4 << 20) {
        refused_at(got, MIB, door);
    }
    // Under the limit every door allocates (mlock may be refused by RLIMIT_MEMLOCK: then the
    // pinned backend says so, which is not the limit's business).
    set_alloc_limit(8 * MIB);
    for (door, got) in every_door(4 << 20) {
        if let Err(e) = got {
            assert!(
                door.contains("inned") && e.to_string().contains("lock"),
                "{door}: {e}"
            );
        }
    }
}

#[test]
fn a_limit_raised_above_the_machines_memory_is_the_one_in_force_everywhere() {
    let _held = hold();
    let Some(memory) = dlport_native::machine_memory() else {
        return;
    };
    let raised = 2 * memory;
    set_alloc_limit(raised);
    // Every registry, the installed one and a fresh native one, has no limit of its own.
    assert_eq!(Registry::process_default().alloc_limit(None), raised);
    assert_eq!(dlport_native::registry().alloc_limit(None), raised);
    // Past the raise, each door names the raised limit, not the machine's memory.
    let past = i64::try_from(3 * memory).unwrap();
    for (door, got) in every_door(past) {
        refused_at(got, raised, door);
    }
    // Restored, the machine's memory is the default in force again.
    set_alloc_limit(0);
    assert_eq!(Registry::process_default().alloc_limit(None), memory);
    for (door, got) in every_door(past) {
        refused_at(got, memory, door);
    }
}
