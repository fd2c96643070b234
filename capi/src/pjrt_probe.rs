//! The PJRT capability probe from C: dlport-native's one probe (`dlport_native::pjrt::probe`),
//! its report handed back as text.

use std::ffi::{CStr, c_char, c_int};

use crate::ffi::{arg, c_string, entry, out_ptr};

/// Probes the PJRT plugin at `path`: loads it (as `dlport_pjrt_load`), then calls it and
/// writes a report, one `key: verdict — why` line each: the API version, `struct_size` and
/// extensions (by type id and name, `unknown` for a type newer than the header dlport reads);
/// the platform, devices and memory kinds; each function dlport uses, called (a function in
/// the table that answers `UNIMPLEMENTED` is `not implemented`); the dtype table (each PJRT
/// element type, its DLPack dtype, and whether the plugin takes it as a view and as a copy);
/// and what dlport does each way (a view, one copy or a refusal, and why). The same report as
/// `python -m dlport pjrt` and the Rust example `pjrt_probe`.
///
/// Errors (`DLPORT_ERR_BACKEND`) are those of `dlport_pjrt_load`; what fails after the load is
/// a line of the report.
///
/// Ownership: `path` stays the caller's. On success `*report_out` is a new string the caller
/// frees with `dlport_string_free`; on error it is untouched. Loading a library runs its code:
/// probe only plugins you trust.
///
/// # Safety
/// `path` is a NUL-terminated string; `report_out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_pjrt_probe(
    path: *const c_char,
    report_out: *mut *mut c_char,
) -> c_int {
    entry(|| {
        let out = out_ptr(report_out, "report_out")?;
        if path.is_null() {
            return Err(arg("path is NULL: pass the plugin library's path"));
        }
        // SAFETY: NUL-terminated (caller contract), read during the call only.
        let path = unsafe { CStr::from_ptr(path) }
            .to_str()
            .map_err(|_| arg("path is not UTF-8"))?;
        let report = dlport_native::pjrt::probe(path)?;
        c_string(report.to_string(), out)
    })
}
