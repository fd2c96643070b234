//! The generated header (`capi/include/dlport.h`) against the Rust source: every dlport error
//! code has exactly one `DLPORT_ERR_*` name, the name of its sub-error variant, and every name has
//! a code; the enums and DLPack names are there, with core's values; every function has an
//! ownership comment; the describe JSON has exactly the documented keys and types.
//! (That the header is what cbindgen generates is `scripts/header.sh --check`.)

use std::collections::{BTreeMap, BTreeSet};

use dlport_core::Error;
use dlport_core::abi::{DeviceType, TypeCode};
use dlport_core::error::LayoutError;

const HEADER: &str = include_str!("../include/dlport.h");
/// The sub-errors' sources, each with its `code()`.
const ERROR_RS: [&str; 4] = [
    include_str!("../../core/src/error/layout.rs"),
    include_str!("../../core/src/error/access.rs"),
    include_str!("../../core/src/error/dispatch.rs"),
    include_str!("../../core/src/error/backend.rs"),
];

/// Variants whose C name is not their own: `BackendError::Failed` kept the name of the old
/// `Error::Backend` (`DLPORT_ERR_BACKEND`), which C callers use.
const C_NAMES: [(&str, &str); 1] = [("Failed", "Backend")];

/// `#define NAME value` and enumerators `NAME = value` of the header.
fn constants() -> BTreeMap<String, i64> {
    let mut found = BTreeMap::new();
    for line in HEADER.lines() {
        let t = line.trim();
        let (name, value) = if let Some(rest) = t.strip_prefix("#define ") {
            match rest.split_once(char::is_whitespace) {
                Some((n, v)) => (n, v.trim()),
                None => continue,
            }
        } else if let Some((n, v)) = t.split_once(" = ") {
            (n, v.trim_end_matches(','))
        } else {
            continue;
        };
        let value = value.trim_start_matches('(').trim_end_matches(')');
        let value = value.trim_end_matches("ULL").trim_end_matches('U');
        if let Ok(v) = value.parse::<i64>() {
            assert!(
                found.insert(name.to_owned(), v).is_none(),
                "{name} is defined twice in dlport.h"
            );
        }
    }
    found
}

fn screaming_snake(camel: &str) -> String {
    let mut out = String::new();
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// `Self::Variant { .. } => N` in the sub-errors' `code`, each variant by its C name.
fn codes_in_error_rs() -> BTreeMap<i64, String> {
    let mut codes = BTreeMap::new();
    for source in ERROR_RS {
        let body = source
            .split_once("pub const fn code(&self)")
            .expect("a sub-error's code() in core/src/error/")
            .1;
        let before = codes.len();
        for line in body.lines() {
            let t = line.trim();
            if !t.starts_with("Self::") {
                if codes.len() > before && t.starts_with('}') {
                    break;
                }
                continue;
            }
            let variant = t["Self::".len()..]
                .split(|c: char| !c.is_ascii_alphanumeric())
                .next()
                .unwrap();
            let variant = C_NAMES
                .iter()
                .find(|(rust, _)| *rust == variant)
                .map_or(variant, |(_, c)| c);
            let code: i64 = t
                .rsplit("=>")
                .next()
                .unwrap()
                .trim()
                .trim_end_matches(',')
                .parse()
                .unwrap();
            assert!(
                codes.insert(code, variant.to_owned()).is_none(),
                "code {code} twice"
            );
        }
        assert!(codes.len() > before, "no code found in a sub-error");
    }
    codes
}

#[test]
fn header_names_every_error_code() {
    let header: BTreeMap<i64, String> = constants()
        .into_iter()
        .filter(|(n, _)| n.starts_with("DLPORT_ERR_"))
        .map(|(n, v)| (v, n))
        .collect();
    let variants = codes_in_error_rs();
    let all: BTreeSet<i64> = (1..=i64::from(Error::CODE_COUNT)).collect();
    assert_eq!(
        variants.keys().copied().collect::<BTreeSet<_>>(),
        all,
        "Error::code's codes"
    );
    assert_eq!(
        header.keys().copied().collect::<BTreeSet<_>>(),
        all,
        "every code 1..=Error::CODE_COUNT has a DLPORT_ERR_ name, and no name has another value"
    );
    assert_eq!(
        constants()
            .keys()
            .filter(|n| n.starts_with("DLPORT_ERR_"))
            .count(),
        all.len(),
        "one name per code"
    );
    for (code, variant) in &variants {
        assert_eq!(
            header[code],
            format!("DLPORT_ERR_{}", screaming_snake(variant)),
            "the name of code {code} is its Error variant's"
        );
    }
    // A real error through the ABI carries the code its name says.
    let c = constants();
    assert_eq!(
        Error::Layout(LayoutError::NullManagedTensor).code() as i64,
        c["DLPORT_ERR_NULL_MANAGED_TENSOR"]
    );
}

#[test]
fn header_names_statuses_enums_and_dlpack_values() {
    let c = constants();
    for (name, value) in [
        ("DLPORT_OK", 0),
        ("DLPORT_PANIC", -1),
        ("DLPORT_INVALID_ARGUMENT", -2),
        ("DLPORT_COPY_NEVER", 0),
        ("DLPORT_COPY_IF_NEEDED", 1),
        ("DLPORT_COPY_ALWAYS", 2),
        ("DLPORT_LAYOUT_ANY", 0),
        ("DLPORT_LAYOUT_DENSE", 1),
        ("DLPORT_LAYOUT_ROW_MAJOR", 2),
        ("DLPACK_FLAG_BITMASK_READ_ONLY", 1),
        ("DLPACK_FLAG_BITMASK_IS_COPIED", 2),
        ("DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED", 4),
    ] {
        assert_eq!(c.get(name), Some(&value), "{name} in dlport.h");
    }
    for d in DeviceType::ALL_KNOWN {
        let name = d.c_name().unwrap();
        assert_eq!(c.get(name), Some(&i64::from(d.0)), "{name} in dlport.h");
    }
    for t in TypeCode::ALL_KNOWN {
        let name = t.c_name().unwrap();
        assert_eq!(c.get(name), Some(&i64::from(t.0)), "{name} in dlport.h");
    }
    // DLPack's declarations are skipped after dlpack.h.
    assert!(HEADER.contains("#if !defined(DLPACK_DLPACK_H_)"));
    assert!(HEADER.contains(&format!(
        "DLPORT_ABI_VERSION_MAJOR {}",
        env!("CARGO_PKG_VERSION_MAJOR")
    )));
}

#[test]
fn every_function_says_who_owns_what() {
    let mut functions = 0;
    let mut comment = String::new();
    for line in HEADER.lines() {
        let t = line.trim();
        if t.starts_with("//") || t.starts_with("/*") || t.starts_with('*') {
            comment.push_str(t);
            comment.push('\n');
            continue;
        }
        if let Some(name) = t
            .split('(')
            .next()
            .and_then(|head| head.split_whitespace().last())
            .map(|n| n.trim_start_matches('*'))
            .filter(|n| n.starts_with("dlport_") && t.contains('('))
        {
            functions += 1;
            assert!(
                comment.contains("Ownership:"),
                "{name} has no \"Ownership:\" line in its comment"
            );
        }
        comment.clear();
    }
    assert!(
        functions >= 20,
        "found only {functions} functions in dlport.h"
    );
}
