//! The C ABI entries added for C producers, called as C would: `dlport_wrap` (the release
//! callback runs exactly once on every path), `dlport_tensor_view`, `dlport_version`, and the
//! describe JSON schema documented in dlport.h.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicUsize, Ordering};

use dlport::cabi::*;
use dlport::ffi::*;
use dlport_core::abi::{DLTensor, FLAG_IS_SUBBYTE_TYPE_PADDED, FLAG_READ_ONLY};
use serde_json::Value;

/// Counts the calls of one wrapped buffer's release callback.
struct Counter(AtomicUsize);

unsafe extern "C" fn count(ctx: *mut c_void) {
    // SAFETY: every test passes a live `Counter` as ctx.
    unsafe { &*ctx.cast::<Counter>() }
        .0
        .fetch_add(1, Ordering::SeqCst);
}

struct Args {
    data: *mut c_void,
    code: u8,
    bits: u8,
    ndim: i32,
    shape: *const i64,
    strides: *const i64,
    flags: u64,
    versioned: c_int,
    null_out: bool,
}

fn wrap(a: &Args, counter: &Counter, out: &mut *mut c_void) -> c_int {
    let out_ptr: *mut *mut c_void = if a.null_out { null_mut() } else { out };
    // SAFETY: the data outlives every tensor in these tests; shape/strides readable for ndim.
    unsafe {
        dlport_wrap(
            a.data,
            1,
            0,
            a.code,
            a.bits,
            1,
            a.ndim,
            a.shape,
            a.strides,
            0,
            a.flags,
            a.versioned,
            Some(count),
            (counter as *const Counter).cast_mut().cast(),
            out_ptr,
        )
    }
}

fn last_error() -> String {
    let p = dlport_last_error();
    assert!(!p.is_null(), "a failed call leaves a message");
    // SAFETY: a NUL-terminated message, valid until the next call.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

#[test]
fn wrap_imports_without_a_copy_and_calls_back_once_after_the_last_use() {
    let mut buf = [0f32, 1., 2., 3., 4., 5.];
    let shape = [2i64, 3];
    let strides = [1i64, 2]; // column-major
    for versioned in [1, 0] {
        let counter = Counter(AtomicUsize::new(0));
        let mut managed = null_mut();
        let a = Args {
            data: buf.as_mut_ptr().cast(),
            code: 2,
            bits: 32,
            ndim: 2,
            shape: shape.as_ptr(),
            strides: strides.as_ptr(),
            flags: 0,
            versioned,
            null_out: false,
        };
        assert_eq!(wrap(&a, &counter, &mut managed), DLPORT_OK);
        let options = DlportImportOptions {
            copy: DlportCopy::Never as i32,
            ..Default::default()
        };
        let mut t = null_mut();
        // SAFETY: an owned tensor from dlport_wrap, handed over.
        let status = unsafe { dlport_import(managed, versioned, &options, &mut t) };
        assert_eq!(status, DLPORT_OK);
        let mut view = std::mem::MaybeUninit::<DLTensor>::uninit();
        // SAFETY: a live handle and a writable DLTensor.
        let status = unsafe { dlport_tensor_view(t, view.as_mut_ptr()) };
        assert_eq!(status, DLPORT_OK);
        // SAFETY: written on success.
        let view = unsafe { view.assume_init() };
        assert_eq!(view.data, buf.as_mut_ptr().cast(), "zero copy");
        assert_eq!(view.ndim, 2);
        // SAFETY: the handle's arrays, valid while it lives.
        let (s, st) = unsafe {
            (
                std::slice::from_raw_parts(view.shape, 2),
                std::slice::from_raw_parts(view.strides, 2),
            )
        };
        assert_eq!((s, st), (&shape[..], &strides[..]));
        assert_eq!(
            counter.0.load(Ordering::SeqCst),
            0,
            "no callback while in use"
        );
        // SAFETY: a live handle, freed once.
        unsafe { dlport_tensor_free(t) };
        assert_eq!(counter.0.load(Ordering::SeqCst), 1);
    }
}

#[test]
fn wrap_calls_back_exactly_once_on_every_error_path() {
    let mut buf = [0u8; 64];
    let shape = [4i64, 4];
    let data: *mut c_void = buf.as_mut_ptr().cast();
    let base = Args {
        data,
        code: 2,
        bits: 32,
        ndim: 2,
        shape: shape.as_ptr(),
        strides: null(),
        flags: 0,
        versioned: 1,
        null_out: false,
    };
    let cases: Vec<(&str, Args, c_int, &str)> = vec![
        (
            "NULL out",
            Args {
                null_out: true,
                ..base
            },
            DLPORT_INVALID_ARGUMENT,
            "out is NULL",
        ),
        (
            "ndim -1",
            Args { ndim: -1, ..base },
            DLPORT_ERR_NDIM_OUT_OF_RANGE,
            "-1",
        ),
        (
            "NULL shape",
            Args {
                shape: null(),
                ..base
            },
            DLPORT_ERR_NULL_SHAPE,
            "shape",
        ),
        (
            "float12",
            Args { bits: 12, ..base },
            DLPORT_ERR_INVALID_BITS,
            "12",
        ),
        (
            "type code 200",
            Args { code: 200, ..base },
            DLPORT_ERR_UNKNOWN_TYPE_CODE,
            "200",
        ),
        (
            "flag bit 9",
            Args {
                flags: 1 << 9,
                ..base
            },
            DLPORT_ERR_UNKNOWN_FLAGS,
            "0x200",
        ),
        (
            "NULL data",
            Args {
                data: null_mut(),
                ..base
            },
            DLPORT_ERR_NULL_DATA,
            "data",
        ),
        (
            "kernel address",
            Args {
                data: usize::MAX as *mut c_void,
                ..base
            },
            DLPORT_ERR_ADDRESS_OVERFLOW,
            "",
        ),
        (
            "READ_ONLY to legacy",
            Args {
                flags: FLAG_READ_ONLY,
                versioned: 0,
                ..base
            },
            DLPORT_ERR_FLAG_NOT_REPRESENTABLE,
            "READ_ONLY",
        ),
        (
            "padded to legacy",
            Args {
                code: 1,
                bits: 4,
                flags: FLAG_IS_SUBBYTE_TYPE_PADDED,
                versioned: 0,
                ..base
            },
            DLPORT_ERR_FLAG_NOT_REPRESENTABLE,
            "",
        ),
    ];
    for (what, a, status, says) in cases {
        let counter = Counter(AtomicUsize::new(0));
        let mut out = null_mut();
        assert_eq!(
            wrap(&a, &counter, &mut out),
            status,
            "{what}: {}",
            last_error()
        );
        assert!(last_error().contains(says), "{what}: {}", last_error());
        assert_eq!(counter.0.load(Ordering::SeqCst), 1, "{what}: one callback");
        assert!(out.is_null(), "{what}: nothing written");
    }
}

#[test]
fn wrap_without_a_callback_and_release_of_the_export() {
    let mut buf = [7u8; 8];
    let shape = [8i64];
    let mut out = null_mut();
    // SAFETY: `buf` outlives the tensor, released below.
    let s = unsafe {
        dlport_wrap(
            buf.as_mut_ptr().cast(),
            1,
            0,
            1,
            8,
            1,
            1,
            shape.as_ptr(),
            null(),
            0,
            FLAG_READ_ONLY,
            1,
            None,
            null_mut(),
            &mut out,
        )
    };
    assert_eq!(s, DLPORT_OK);
    let mut json = null_mut();
    // SAFETY: a live tensor; writable out.
    assert_eq!(unsafe { dlport_describe(out, 1, &mut json) }, DLPORT_OK);
    let v = take_json(json);
    assert_eq!(v["read_only"], Value::Bool(true));
    assert_eq!(v["shape"], serde_json::json!([8]));
    // SAFETY: released once.
    assert_eq!(unsafe { dlport_release(out, 1) }, DLPORT_OK);
}

fn take_json(p: *mut c_char) -> Value {
    // SAFETY: a string from dlport, freed once below.
    let v = serde_json::from_str(&unsafe { CStr::from_ptr(p) }.to_string_lossy()).unwrap();
    // SAFETY: as above.
    unsafe { dlport_string_free(p) };
    v
}

/// The schema written in dlport.h for dlport_describe / dlport_tensor_describe.
fn check_schema(v: &Value, handle: bool) {
    let obj = v.as_object().expect("an object");
    let mut want = vec![
        "shape",
        "strides",
        "dtype",
        "device",
        "byte_offset",
        "flags",
        "version",
        "numel",
        "contiguity",
        "byte_span",
        "host_accessible",
        "alignment",
        "read_only",
        "copied",
    ];
    if handle {
        want.extend(["backend", "users", "data"]);
    }
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    want.sort_unstable();
    assert_eq!(keys, want, "exactly the documented keys");
    let ints = |k: &str| v[k].as_array().unwrap().iter().all(Value::is_i64);
    assert!(ints("shape") && ints("strides"));
    assert!(v["dtype"].is_string() && v["device"].is_string());
    for k in ["byte_offset", "flags", "numel"] {
        assert!(v[k].is_u64(), "{k}");
    }
    match &v["version"] {
        Value::Null => {}
        Value::Object(o) => {
            assert!(o.len() == 2 && o["major"].is_u64() && o["minor"].is_u64());
        }
        other => panic!("version {other}"),
    }
    assert!(
        ["both", "row_major", "column_major", "permuted", "strided"]
            .contains(&v["contiguity"].as_str().unwrap())
    );
    assert!(v["byte_span"].as_array().unwrap().len() == 2 && ints("byte_span"));
    for k in ["host_accessible", "read_only", "copied"] {
        assert!(v[k].is_boolean(), "{k}");
    }
    assert!(v["alignment"].is_null() || v["alignment"].is_u64());
    if handle {
        assert!(v["backend"].is_string() && v["users"].is_u64() && v["data"].is_u64());
    }
}

#[test]
fn describe_json_has_the_documented_schema() {
    let shape = [3i64, 5];
    let mut t = null_mut();
    // SAFETY: shape readable for 2 values; writable out.
    let s = unsafe { dlport_alloc(null(), 1, 0, 2, 32, 1, shape.as_ptr(), 2, &mut t) };
    assert_eq!(s, DLPORT_OK);
    let mut json = null_mut();
    // SAFETY: a live handle; writable out.
    assert_eq!(unsafe { dlport_tensor_describe(t, &mut json) }, DLPORT_OK);
    let v = take_json(json);
    check_schema(&v, true);
    assert_eq!(v["backend"], "cpu");
    assert_eq!(v["shape"], serde_json::json!([3, 5]));
    let mut data = null_mut();
    let mut off = 0;
    // SAFETY: as above.
    let status = unsafe { dlport_tensor_data(t, &mut data, &mut off) };
    assert_eq!(status, DLPORT_OK);
    assert_eq!(v["data"].as_u64(), Some(data as u64));

    let (mut m, mut versioned) = (null_mut(), 0);
    // SAFETY: a live handle; writable outs.
    let s = unsafe { dlport_export(t, 1, 3, 0, 0, 1, &mut m, &mut versioned) };
    assert_eq!(s, DLPORT_OK);
    // SAFETY: a live export; writable out.
    let status = unsafe { dlport_describe(m, versioned, &mut json) };
    assert_eq!(status, DLPORT_OK);
    check_schema(&take_json(json), false);
    // SAFETY: released once, freed once.
    unsafe {
        assert_eq!(dlport_release(m, versioned), DLPORT_OK);
        dlport_tensor_free(t);
    }
}

#[test]
fn version_is_the_crates() {
    // SAFETY: a static NUL-terminated string.
    let v = unsafe { CStr::from_ptr(dlport_version()) };
    assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
}

/// The fields DLPack leaves to the producer, on every tensor the C ABI hands out
/// (`dlport_wrap`, `dlport_convert`, `dlport_export`, `dlport_host_view`, `dlport_compact`, in
/// both forms): `manager_ctx` is never NULL (Paddle 3.3 never calls the deleter of a tensor
/// whose `manager_ctx` is NULL), host memory's `byte_offset` is 0 with `data` at the first
/// element (Paddle ignores `byte_offset`), and `shape`/`strides` are never NULL, also 0-d.
#[test]
fn every_c_export_fills_the_fields_consumers_read() {
    use dlport_core::abi::{DLManagedTensor, DLManagedTensorVersioned};
    let fields = |p: *mut c_void, versioned: c_int| -> (*mut c_void, DLTensor) {
        // SAFETY: a live tensor dlport handed out, of the form `versioned` says.
        unsafe {
            if versioned != 0 {
                let h = &*p.cast::<DLManagedTensorVersioned>();
                (h.manager_ctx, h.dl_tensor)
            } else {
                let h = &*p.cast::<DLManagedTensor>();
                (h.manager_ctx, h.dl_tensor)
            }
        }
    };
    let mut buf = [0f32, 1., 2., 3., 4., 5., 6., 7.];
    let first = buf.as_mut_ptr().wrapping_add(2) as usize;
    for (ndim, shape) in [(1, [6i64]), (0, [1])] {
        for versioned in [1, 0] {
            let counter = Counter(AtomicUsize::new(0));
            let mut problems = Vec::new();
            let mut check = |path: &str, p: *mut c_void, v: c_int| {
                let (ctx, t) = fields(p, v);
                if ctx.is_null() {
                    problems.push(format!("{path}: manager_ctx is NULL"));
                }
                if t.byte_offset != 0 || t.data as usize != first {
                    problems.push(format!("{path}: data {:?} + {}", t.data, t.byte_offset));
                }
                if t.shape.is_null() || t.strides.is_null() {
                    problems.push(format!("{path}: NULL shape or strides"));
                }
            };
            let mut wrapped = null_mut();
            // SAFETY: `buf` outlives the tensors; `shape` holds `ndim` values.
            let status = unsafe {
                dlport_wrap(
                    buf.as_mut_ptr().cast(),
                    1,
                    0,
                    2,
                    32,
                    1,
                    ndim,
                    shape.as_ptr(),
                    null(),
                    8,
                    0,
                    versioned,
                    Some(count),
                    (&counter as *const Counter).cast_mut().cast(),
                    &mut wrapped,
                )
            };
            assert_eq!(status, 0, "{}", last_error());
            check("dlport_wrap", wrapped, versioned);
            let mut converted = null_mut();
            // SAFETY: consumes `wrapped`.
            let status = unsafe { dlport_convert(wrapped, versioned, versioned, &mut converted) };
            assert_eq!(status, 0);
            check("dlport_convert", converted, versioned);
            let mut handle: *mut DlportTensor = null_mut();
            // SAFETY: consumes `converted`.
            let status = unsafe { dlport_import(converted, versioned, null(), &mut handle) };
            assert_eq!(status, 0);
            for (major, v) in [(1, 1), (-1, 0)] {
                let (mut out, mut got) = (null_mut(), -1);
                // SAFETY: a live handle; the out pointers are writable.
                let status =
                    unsafe { dlport_export(handle, major, 3, 0, 0, 1, &mut out, &mut got) };
                assert_eq!(status, 0);
                assert_eq!(got, v);
                check("dlport_export", out, got);
                let mut viewed = null_mut();
                // SAFETY: consumes `out`.
                let status = unsafe { dlport_host_view(out, got, 0, 0, got, &mut viewed) };
                assert_eq!(status, 0);
                check("dlport_host_view", viewed, got);
                // SAFETY: released once.
                assert_eq!(unsafe { dlport_release(viewed, got) }, 0);
            }
            // SAFETY: a live handle, freed once.
            unsafe { dlport_tensor_free(handle) };
            assert_eq!(counter.0.load(Ordering::SeqCst), 1, "released once");
            assert!(
                problems.is_empty(),
                "ndim {ndim}, versioned {versioned}: {problems:?}"
            );
        }
    }
}
