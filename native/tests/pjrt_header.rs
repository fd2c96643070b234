//! The PJRT ABI dlport declares (`pjrt::sys`, the one place it is declared),
//! checked against the real `pjrt_c_api.h` a plugin wheel ships: every slot's offset in
//! `PJRT_Api`, and every struct's `sizeof`, `STRUCT_SIZE` and the offset of each field dlport
//! declares. A C program generated from dlport's own lists is compiled against the header
//! with `cc` and prints the header's numbers; nothing of the header is copied here.
//!
//! The header: `DLPORT_PJRT_HEADER` (a path), else every `pjrt_c_api.h` under the plugin cache
//! that scripts/pjrt-test.sh fills (`${XDG_CACHE_HOME:-~/.cache}/dlport/pjrt`). Without one (or
//! without `cc`) the test prints SKIP and why.
#![cfg(feature = "pjrt")]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use dlport_native::pjrt::sys;

/// The headers to check against.
fn headers() -> Vec<PathBuf> {
    if let Some(h) = std::env::var_os("DLPORT_PJRT_HEADER") {
        return vec![PathBuf::from(h)];
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")));
    let mut found = Vec::new();
    if let Some(c) = cache {
        find(&c.join("dlport/pjrt"), 6, &mut found);
    }
    found.sort();
    found
}

/// Every `pjrt_c_api.h` under `dir`, at most `depth` folders down.
fn find(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() && depth > 0 {
            find(&p, depth - 1, out);
        } else if p.file_name().is_some_and(|n| n == "pjrt_c_api.h") {
            out.push(p);
        }
    }
}

/// Every slot and struct dlport declares.
fn declared() -> (Vec<sys::Slot>, Vec<sys::Layout>) {
    (sys::SLOTS.to_vec(), sys::layouts())
}

/// The C program that prints the header's numbers for what dlport declares, one per line:
/// `KEY VALUE`.
fn program(slots: &[sys::Slot], layouts: &[sys::Layout]) -> String {
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include \"pjrt_c_api.h\"\nint main(void) {\n",
    );
    let mut line = |key: String, expr: String| {
        c += &format!("  printf(\"%s %zu\\n\", \"{key}\", (size_t)({expr}));\n");
    };
    line("minor".into(), "PJRT_API_MINOR".into());
    line("api_struct_size".into(), "PJRT_Api_STRUCT_SIZE".into());
    for s in slots {
        line(
            format!("slot.{}", s.name),
            format!("offsetof(PJRT_Api, {})", s.name),
        );
    }
    for l in layouts {
        line(format!("sizeof.{}", l.name), format!("sizeof({})", l.name));
        line(
            format!("struct_size.{}", l.name),
            format!("{}_STRUCT_SIZE", l.name),
        );
        for (f, _) in &l.fields {
            line(
                format!("offset.{}.{f}", l.name),
                format!("offsetof({}, {f})", l.name),
            );
        }
    }
    c + "  return 0;\n}\n"
}

/// The header's numbers, by compiling and running [`program`] against `header`; `Err` says why
/// not (no `cc`, a name the header lacks).
fn header_numbers(header: &Path, source: &str) -> Result<HashMap<String, usize>, String> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pjrt_header");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let src = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&src, source).map_err(|e| e.to_string())?;
    let include = header.parent().expect("a header has a folder");
    let built = Command::new("cc")
        .args(["-std=c11", "-w", "-I"])
        .arg(include)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .map_err(|e| format!("cc could not run ({e})"))?;
    if !built.status.success() {
        return Err(format!(
            "cc failed on {} against {}: a name dlport declares is not in the header, or the \
             header does not compile:\n{}",
            src.display(),
            header.display(),
            String::from_utf8_lossy(&built.stderr)
        ));
    }
    let ran = Command::new(&exe).output().map_err(|e| e.to_string())?;
    assert!(ran.status.success(), "{} failed", exe.display());
    Ok(String::from_utf8_lossy(&ran.stdout)
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_owned(), v.parse().expect("a number")))
        .collect())
}

/// What differs between `header`'s numbers and dlport's declarations, one line each.
fn mismatches(
    h: &HashMap<String, usize>,
    slots: &[sys::Slot],
    layouts: &[sys::Layout],
) -> Vec<String> {
    let minor = h["minor"];
    // A header of dlport's own version must agree exactly; a newer one may have grown a struct
    // past its last field dlport declares (dlport sends the shorter struct_size it knows).
    let same = minor == sys::API_MINOR as usize;
    let mut bad = Vec::new();
    let mut check = |what: String, ours: usize, theirs: usize, grows: bool| {
        if ours != theirs && !(grows && !same && ours < theirs) {
            bad.push(format!(
                "{what}: dlport has {ours}, the header (API 0.{minor}) {theirs}"
            ));
        }
    };
    if same {
        check(
            "PJRT_Api_STRUCT_SIZE".into(),
            sys::API_SIZE_0_81,
            h["api_struct_size"],
            false,
        );
    }
    for s in slots {
        let key = format!("slot.{}", s.name);
        check(key.clone(), s.end() - size_of::<usize>(), h[&key], false);
    }
    for l in layouts {
        if l.name != "PJRT_Api" {
            // Only the head of PJRT_Api is declared as a struct; its slots are checked above.
            let key = format!("sizeof.{}", l.name);
            check(key.clone(), l.size, h[&key], true);
            let key = format!("struct_size.{}", l.name);
            check(key.clone(), l.struct_size, h[&key], true);
        }
        for (f, offset) in &l.fields {
            let key = format!("offset.{}.{f}", l.name);
            check(key.clone(), *offset, h[&key], false);
        }
    }
    bad
}

#[test]
fn declarations_match_pjrt_c_api_h() {
    let found = headers();
    if found.is_empty() {
        eprintln!(
            "SKIP pjrt_header: no pjrt_c_api.h (set DLPORT_PJRT_HEADER, or run \
             scripts/pjrt-test.sh, which caches plugin wheels that ship one)"
        );
        return;
    }
    let (slots, layouts) = declared();
    assert!(
        slots.len() >= 35 && layouts.len() >= 40,
        "the lists are whole"
    );
    let source = program(&slots, &layouts);
    for header in found {
        assert!(
            header.is_file(),
            "DLPORT_PJRT_HEADER = {} is no file",
            header.display()
        );
        let numbers = match header_numbers(&header, &source) {
            Ok(n) => n,
            Err(why) if why.starts_with("cc could not run") => {
                eprintln!("SKIP pjrt_header: {why}");
                return;
            }
            Err(why) => panic!("{why}"),
        };
        let bad = mismatches(&numbers, &slots, &layouts);
        assert!(
            bad.is_empty(),
            "dlport's PJRT declarations differ from {}:\n{}",
            header.display(),
            bad.join("\n")
        );
        eprintln!(
            "pjrt_header: {} slots, {} structs and {} fields match {} (API 0.{})",
            slots.len(),
            layouts.len(),
            layouts.iter().map(|l| l.fields.len()).sum::<usize>(),
            header.display(),
            numbers["minor"]
        );
    }
}
