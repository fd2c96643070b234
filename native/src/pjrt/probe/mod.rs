//! The capability probe: what a PJRT plugin offers and what dlport does with it, found by
//! calling it. A function that is in the table but fails (a stub answering `UNIMPLEMENTED`) is
//! no implementation. One implementation serves Rust ([`probe`]), C (`dlport_pjrt_probe`),
//! Python (`python -m dlport pjrt`) and the matrix of plugin builds in `docs/pjrt-matrix.md`.

mod calls;

use std::fmt;
use std::sync::Arc;

use dlport_core::backend::AlignedBuffer;
use dlport_core::{CopyPolicy, Error};

use super::client::{ClientOptions, PjrtClient, PjrtPlugin};
use super::{sys, types};
use calls::{Calls, F32, Raw, host_tensor, outcome};

/// One line of a probe report: what was asked (`key`), the short answer (`verdict`, the same
/// for every run of one plugin build: the matrix compares it) and why (`why`: the plugin's or
/// dlport's words, which may name addresses).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeLine {
    /// The section and the item: `PJRT API`, `primitive PJRT_Client_Compile`, `dtype F32`, …
    pub key: String,
    /// The answer.
    pub verdict: String,
    /// Why, or empty.
    pub why: String,
}

/// What [`probe`] found, line by line; its `Display` is the report `python -m dlport pjrt`,
/// `dlport_pjrt_probe` and the `pjrt_probe` example print (`key: verdict — why`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProbeReport {
    lines: Vec<ProbeLine>,
}

impl fmt::Display for ProbeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for l in &self.lines {
            write!(f, "{}: {}", l.key, l.verdict)?;
            if !l.why.is_empty() {
                write!(f, " — {}", l.why)?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// Loads the plugin at `path` (as [`PjrtPlugin::load`]) and probes it.
pub fn probe(path: &str) -> Result<ProbeReport, Error> {
    ProbeReport::of(&PjrtPlugin::load(path)?)
}

/// `2 * x + 1` over a 2x3 f32 tensor, in StableHLO: the program the probe compiles and runs
/// (the PJRT tests compile the same file).
const AFFINE: &str = include_str!("affine.mlir");

impl ProbeReport {
    /// The lines, in order.
    pub fn lines(&self) -> &[ProbeLine] {
        &self.lines
    }

    /// The line for `key`, if the probe reached it.
    pub fn get(&self, key: &str) -> Option<&ProbeLine> {
        self.lines.iter().find(|l| l.key == key)
    }

    fn push(&mut self, key: impl Into<String>, verdict: impl Into<String>, why: impl Into<String>) {
        self.lines.push(ProbeLine {
            key: key.into(),
            verdict: verdict.into(),
            why: why.into(),
        });
    }

    /// Probes a loaded plugin: its table, then a client of it (default options) and its
    /// device 0. A client the plugin refuses ends the report with the refusal.
    pub fn of(plugin: &Arc<PjrtPlugin>) -> Result<Self, Error> {
        let mut r = Self::default();
        r.push("plugin", plugin.origin(), "");
        let (major, minor) = plugin.api_version();
        r.push("PJRT API", format!("{major}.{minor}"), "");
        r.push("struct_size", plugin.struct_size().to_string(), "");
        for (t, name, size) in plugin.extensions() {
            let why = match name {
                Some(_) => format!("struct_size {size}"),
                None => format!(
                    "struct_size {size}; a type newer than pjrt_c_api.h {}.{}, which dlport reads",
                    sys::API_MAJOR,
                    sys::API_MINOR
                ),
            };
            r.push(format!("extension {t}"), name.unwrap_or("unknown"), why);
        }
        let client = match PjrtClient::create(plugin, &ClientOptions::default()) {
            Ok(c) => c,
            Err(e) => {
                r.push("client", "refused", e.to_string());
                return Ok(r);
            }
        };
        r.push(
            "platform",
            client.platform(),
            format!("DLPack device type {}", client.device_type().0),
        );
        let devices: Vec<String> = client
            .devices()
            .iter()
            .map(|d| format!("{} ({})", d.device, d.kind))
            .collect();
        r.push("devices", devices.join(", "), "");
        let Some(dev) = client.devices().first() else {
            return Ok(r);
        };
        let calls = Calls {
            client: &client,
            api: client.api(),
            device: dev.raw,
        };
        match calls.memory_kinds() {
            Ok(k) => r.push("memory kinds (device 0)", k.join(", "), ""),
            Err(e) => {
                let (v, why) = outcome::<()>(&Err(e));
                r.push("memory kinds (device 0)", v, why);
            }
        }
        r.primitives(&calls)?;
        r.dtypes(&calls)?;
        r.directions(&calls)?;
        Ok(r)
    }

    /// Each function dlport uses, called on a small f32 buffer.
    fn primitives(&mut self, calls: &Calls<'_>) -> Result<(), Error> {
        let host = AlignedBuffer::zeroed(64, 64)?;
        let copy = calls.copy_of_host(host.as_ptr().cast(), F32, &[2, 3]);
        let (v, why) = outcome(&copy);
        self.push(
            format!("primitive {}", sys::CLIENT_BUFFER_FROM_HOST_BUFFER.name),
            v,
            why,
        );
        let view = calls.view(host.as_ptr().cast(), F32, &[2, 3]);
        let (mut v, mut why) = outcome(&view);
        if let Ok(b) = &view {
            if calls.pointer(b.raw) != Some(host.as_ptr() as usize) {
                (v, why) = (
                    "implemented",
                    "a copy: its data is not the memory given".into(),
                );
            }
        }
        self.push(
            format!("primitive {}", sys::CLIENT_CREATE_VIEW.name),
            v,
            why,
        );
        drop(view);
        let Some(b) = copy
            .ok()
            .or_else(|| calls.view(host.as_ptr().cast(), F32, &[2, 3]).ok())
        else {
            return Ok(());
        };
        for (f, v, why) in calls.buffer_functions(&b) {
            self.push(format!("primitive {f}"), v, why);
        }
        drop(b);
        let exe = calls.client.compile_mlir(AFFINE);
        let (v, why) = outcome(&exe);
        self.push(format!("primitive {}", sys::CLIENT_COMPILE.name), v, why);
        if let Ok(exe) = exe {
            // The argument: a copy where the plugin makes one, else what the import makes.
            let arg = |copy| {
                host_tensor(&[2, 3], 0, false, false)
                    .and_then(|(t, _)| calls.client.import(t, copy, None))
            };
            let run = arg(CopyPolicy::Always)
                .or_else(|_| arg(CopyPolicy::IfNeeded))
                .and_then(|x| exe.execute(&[&x]));
            let (v, why) = outcome(&run);
            self.push(
                format!("primitive {}", sys::LOADED_EXECUTABLE_EXECUTE.name),
                v,
                why,
            );
        }
        Ok(())
    }

    /// Every PJRT element type dlport maps, with its DLPack dtype, tried as a view and as a
    /// copy of four elements.
    fn dtypes(&mut self, calls: &Calls<'_>) -> Result<(), Error> {
        let host = AlignedBuffer::zeroed(64, 64)?;
        for (kind, name, dtype) in types::table() {
            let view = calls.view(host.as_ptr().cast(), kind, &[4]);
            let copy = calls.copy_of_host(host.as_ptr().cast(), kind, &[4]);
            let yes = |r: &Result<Raw<'_>, Error>| if r.is_ok() { "yes" } else { "no" };
            let why: Vec<String> = [("view", &view), ("copy", &copy)]
                .iter()
                .filter_map(|(w, r)| r.as_ref().err().map(|e| format!("{w}: {e}")))
                .collect();
            self.push(
                format!("dtype {name}"),
                format!("{dtype}; view {}, copy {}", yes(&view), yes(&copy)),
                why.join("; "),
            );
        }
        Ok(())
    }

    /// What dlport does each way: host tensors imported with the default policy, a PJRT
    /// buffer exported to DLPack.
    fn directions(&mut self, calls: &Calls<'_>) -> Result<(), Error> {
        let cases: [(&str, &[i64], usize, bool, bool); 5] = [
            ("64-byte aligned, writable", &[2, 3], 0, false, false),
            ("4 bytes off 64-byte alignment", &[2, 3], 4, false, false),
            ("READ_ONLY", &[2, 3], 0, true, false),
            ("column-major", &[2, 3], 0, false, true),
            (
                "empty (0x3), 4 bytes off alignment",
                &[0, 3],
                4,
                false,
                false,
            ),
        ];
        for (what, shape, offset, read_only, column_major) in cases {
            let key = format!("import host, {what}");
            let (t, address) = host_tensor(shape, offset, read_only, column_major)?;
            match calls.client.import(t, CopyPolicy::IfNeeded, None) {
                Ok(b) if calls.pointer(b.as_raw().cast()) == Some(address) => {
                    self.push(
                        key,
                        "a view",
                        "PJRT_Client_CreateViewOfDeviceBuffer over the producer's memory",
                    );
                }
                Ok(_) => {
                    // Why not a view: the refusal a CopyPolicy::Never import gives.
                    let (t, _) = host_tensor(shape, offset, read_only, column_major)?;
                    let why = match calls.client.import(t, CopyPolicy::Never, None) {
                        Err(e) => e.to_string(),
                        Ok(_) => "the plugin made a copy of a view".into(),
                    };
                    self.push(key, "one copy", why);
                }
                Err(e) => self.push(key, "refused", e.to_string()),
            }
        }
        let (t, _) = host_tensor(&[2, 3], 0, false, false)?;
        let key = "export PJRT buffer to DLPack";
        match calls.client.import(t, CopyPolicy::Always, None) {
            Err(e) => self.push(key, "not tried", format!("no buffer to export: {e}")),
            Ok(b) => match b.to_dlpack(true) {
                Ok(m) if calls.pointer(b.as_raw().cast()) == Some(m.view().data() as usize) => {
                    let why = format!(
                        "an external reference on the plugin's buffer, as {}",
                        m.view().device()
                    );
                    self.push(key, "by reference", why);
                }
                Ok(m) => self.push(key, "one copy", format!("as {}", m.view().device())),
                Err(e) => self.push(key, "refused", e.to_string()),
            },
        }
        Ok(())
    }
}
