//! The C ABI works on the process-wide default in force: where core's default (the CPU backend
//! only) came first, the entries use it rather than fail. One test function: the default is
//! process-wide.

use dlport_core::abi::RawManaged;
use dlport_core::{ExportBuilder, Registry};

#[test]
fn the_c_abi_works_on_a_default_installed_first_by_someone_else() {
    assert!(Registry::get_default().is_none());
    // A first use of the front door installs core's default …
    let core = Registry::process_default();
    let m = ExportBuilder::from_vec(vec![1i32; 2], &[2])
        .build()
        .unwrap();
    let RawManaged::Versioned(raw) = m.into_raw() else {
        unreachable!("ExportBuilder::build makes a versioned tensor")
    };
    let mut out = std::ptr::null_mut();
    // … and the C ABI imports through it. SAFETY: a live versioned tensor handed over once;
    // `out` is writable.
    let rc =
        unsafe { dlport::ffi::dlport_import(raw.as_ptr().cast(), 1, std::ptr::null(), &mut out) };
    assert_eq!(rc, 0);
    assert!(std::ptr::eq(Registry::get_default().unwrap(), core));
    // SAFETY: a handle from dlport_import, freed once.
    unsafe { dlport::ffi::dlport_tensor_free(out) };
}
