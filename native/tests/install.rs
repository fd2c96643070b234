//! `dlport_native::install()`: the process-wide default with every backend of the machine,
//! installed once, shared by the front door and the C ABI (`install_or_default`, what
//! dlport-capi calls). One test function: the default is
//! process-wide, so the steps' order matters.

use dlport_core::error::DispatchError;
use dlport_core::{
    Error, ExportBuilder, ExportOptions, ImportOptions, Registry, from_dlpack, to_dlpack,
};

#[test]
fn install_is_once_idempotent_and_shared_with_the_c_abi() {
    assert!(Registry::get_default().is_none());
    // A process limit set before install() holds after it (the machine's memory is only the
    // default), and no call can raise it.
    dlport_core::set_alloc_limit(1 << 20);
    // Eight threads race to install: all get the same registry, with the native backends.
    let got: Vec<usize> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..8)
            .map(|_| s.spawn(|| dlport_native::install().unwrap() as *const Registry as usize))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(got.windows(2).all(|w| w[0] == w[1]), "{got:x?}");
    let r = Registry::get_default().unwrap();
    assert_eq!(r as *const Registry as usize, got[0]);
    let names: Vec<_> = r.names().collect();
    assert!(
        names.contains(&"cpu") && names.contains(&"pinned"),
        "{names:?}"
    );
    assert_eq!(
        Registry::process_default() as *const Registry as usize,
        got[0]
    );

    assert_eq!(
        r.alloc_limit(None),
        1 << 20,
        "the limit set before install()"
    );
    assert_eq!(
        r.alloc_limit(Some(1 << 30)),
        1 << 20,
        "a call cannot raise it"
    );
    assert_eq!(r.alloc_limit(Some(1 << 10)), 1 << 10, "a call can lower it");
    let big = ExportBuilder::from_vec(vec![1u8], &[1 << 21])
        .strides(&[0])
        .build()
        .unwrap();
    let always = ImportOptions {
        copy: dlport_core::CopyPolicy::Always,
        max_alloc: Some(1 << 30),
        ..ImportOptions::default()
    };
    let err = from_dlpack(big, &always).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Dispatch(DispatchError::AllocationLimit { limit, .. }) if limit == 1 << 20
        ),
        "{err}"
    );
    // Restored to the default, the limit is the machine's memory, which install() gave.
    dlport_core::set_alloc_limit(0);
    if let Some(memory) = dlport_native::machine_memory() {
        assert_eq!(r.alloc_limit(None), memory);
    }
    let m = ExportBuilder::from_vec(vec![3u8; 8], &[8]).build().unwrap();
    let t = from_dlpack(m, &ImportOptions::default()).unwrap();
    let back = to_dlpack(&t, &ExportOptions::versioned()).unwrap();
    assert_eq!(back.as_slice::<u8>().unwrap(), &[3; 8]);

    // Another registry cannot replace it.
    let err = Registry::with_cpu().install_default().unwrap_err();
    assert!(err.to_string().contains("backends: cpu, pinned"), "{err}");
}

#[test]
fn a_default_installed_first_by_someone_else_is_named_in_the_error() {
    // Run in a child process: this binary's other test installs the native default.
    if std::env::var_os("DLPORT_INSTALL_CHILD").is_none() {
        let out = dlport_testkit::process::this_binary()
            .unwrap()
            .args([
                "--exact",
                "a_default_installed_first_by_someone_else_is_named_in_the_error",
                "--nocapture",
            ])
            .env("DLPORT_INSTALL_CHILD", "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{text}");
        assert!(text.contains("child checks passed"), "{text}");
        return;
    }
    // A first use of the front door installs core's default (the CPU backend only) …
    let _ = Registry::process_default();
    // … so installing the native one now is refused, naming what is in force.
    let err = dlport_native::install().unwrap_err();
    assert_eq!(err.code(), 40);
    assert!(matches!(
        &err,
        Error::Dispatch(DispatchError::DefaultInstalled { .. })
    ));
    let text = err.to_string();
    assert!(
        text.contains("backends: cpu") && text.contains("dlport_native::install()"),
        "{text}"
    );
    // What the C ABI (dlport-capi) works on is the default in force: core's registry.
    let in_force = dlport_native::install_or_default();
    assert!(std::ptr::eq(in_force, Registry::process_default()));
    assert_eq!(in_force.names().collect::<Vec<_>>(), ["cpu"]);
    println!("child checks passed");
}
