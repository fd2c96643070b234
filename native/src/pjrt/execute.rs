//! [`PjrtExecutable`]: a StableHLO program (MLIR text) compiled by the plugin
//! (`PJRT_Client_Compile`) and run on PJRT buffers (`PJRT_LoadedExecutable_Execute`), no
//! input donated, so an imported view is only read.

use std::ffi::{c_char, c_void};

use dlport_core::{DataType, Error};

use super::buffer::{PjrtBuffer, await_event};
use super::client::PjrtClient;
use super::{sys, types};

/// A serialized `xla.CompileOptionsProto`: `executable_build_options` (field 3) with
/// `num_replicas` (field 4) = 1 and `num_partitions` (field 5) = 1, one device.
const COMPILE_OPTIONS: &[u8] = &[0x1a, 0x04, 0x20, 0x01, 0x28, 0x01];

/// A compiled program, destroyed once when dropped.
pub struct PjrtExecutable {
    raw: *mut sys::PJRT_LoadedExecutable,
    client: PjrtClient,
    outputs: usize,
    /// The parameters of its `@main`, as the program text declares them, where dlport reads
    /// them all (PJRT has no function that reports parameter types).
    params: Option<Vec<Param>>,
}

/// A parameter's element type (`None`: one dlport does not check) and dims (`None` for a
/// dynamic one).
#[derive(Clone, Debug, PartialEq)]
struct Param {
    dtype: Option<DataType>,
    dims: Vec<Option<i64>>,
}

/// The parameters of `@main` in StableHLO text (`%x: tensor<2x3xf32> {attrs}`, …), or `None`
/// where the text says something else than ranked tensors (then nothing is checked).
fn signature(mlir: &str) -> Option<Vec<Param>> {
    let start = mlir.find("@main(")? + "@main(".len();
    let mut depth = 0usize;
    let mut args = Vec::new();
    let mut from = start;
    for (i, c) in mlir[start..].char_indices() {
        match c {
            '(' | '<' | '{' | '[' => depth += 1,
            ')' if depth == 0 => {
                args.push(&mlir[from..start + i]);
                break;
            }
            ')' | '>' | '}' | ']' => depth = depth.checked_sub(1)?,
            ',' if depth == 0 => {
                args.push(&mlir[from..start + i]);
                from = start + i + 1;
            }
            _ => {}
        }
    }
    if args.len() == 1 && args[0].trim().is_empty() {
        return Some(Vec::new());
    }
    args.iter().map(|a| param(a)).collect()
}

/// One `%name: tensor<...>` parameter.
fn param(arg: &str) -> Option<Param> {
    let (name, ty) = arg.split_once(':')?;
    if !name.trim().starts_with('%') {
        return None;
    }
    let inner = ty.trim().strip_prefix("tensor<")?;
    let mut depth = 0usize;
    let end = inner.char_indices().find_map(|(i, c)| match c {
        '<' => {
            depth += 1;
            None
        }
        '>' if depth == 0 => Some(i),
        '>' => {
            depth -= 1;
            None
        }
        _ => None,
    })?;
    let mut rest = &inner[..end];
    let mut dims = Vec::new();
    while let Some((dim, tail)) = rest.split_once('x') {
        match dim {
            "?" => dims.push(None),
            d if !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()) => {
                dims.push(Some(d.parse().ok()?));
            }
            _ => break,
        }
        rest = tail;
    }
    Some(Param {
        dtype: element(rest),
        dims,
    })
}

/// The DLPack type of an MLIR element type, by PJRT's name for it.
fn element(mlir: &str) -> Option<DataType> {
    let name = match mlir {
        "i1" => "PRED".to_owned(),
        "bf16" => "BF16".to_owned(),
        "complex<f32>" => "C64".to_owned(),
        "complex<f64>" => "C128".to_owned(),
        _ => {
            if let Some(bits) = mlir.strip_prefix("ui") {
                format!("U{bits}")
            } else if let Some(bits) = mlir.strip_prefix("si").or(mlir.strip_prefix('i')) {
                format!("S{bits}")
            } else if mlir.starts_with('f') {
                mlir.to_ascii_uppercase()
            } else {
                return None;
            }
        }
    };
    types::by_name(&name)
}

/// `f32[2,3]`, `s32[?,3]`.
fn describe(dtype: Option<DataType>, dims: &[Option<i64>]) -> String {
    let dims: Vec<String> = dims
        .iter()
        .map(|d| d.map_or("?".into(), |d| d.to_string()))
        .collect();
    let dtype = dtype.map_or("?".into(), |t| t.to_string());
    format!("{dtype}[{}]", dims.join(","))
}

// SAFETY: PJRT executables may be used and destroyed from any thread (PJRT C API).
unsafe impl Send for PjrtExecutable {}
// SAFETY: as above; execution is thread-safe in PJRT.
unsafe impl Sync for PjrtExecutable {}

impl core::fmt::Debug for PjrtExecutable {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PjrtExecutable")
            .field("outputs", &self.outputs)
            .finish()
    }
}

impl Drop for PjrtExecutable {
    fn drop(&mut self) {
        let mut a = sys::LoadedExecutable_Destroy_Args::new();
        a.executable = self.raw;
        // SAFETY: destroyed once, here; an error cannot be reported from a drop.
        let _ = unsafe { self.client.api().loaded_executable_destroy(&mut a) };
    }
}

impl PjrtClient {
    /// Compiles a StableHLO (or MHLO) program given as MLIR text, for one device.
    pub fn compile_mlir(&self, mlir: &str) -> Result<PjrtExecutable, Error> {
        let api = *self.api();
        let format = "mlir";
        let program = sys::Program {
            head: sys::Head {
                struct_size: sys::Program::STRUCT_SIZE,
                extension_start: std::ptr::null_mut(),
            },
            code: mlir.as_ptr().cast::<c_char>().cast_mut(),
            code_size: mlir.len(),
            format: format.as_ptr().cast(),
            format_size: format.len(),
        };
        let mut a = sys::Client_Compile_Args::new();
        a.client = self.inner.raw;
        a.program = &program;
        a.compile_options = COMPILE_OPTIONS.as_ptr().cast();
        a.compile_options_size = COMPILE_OPTIONS.len();
        // SAFETY: the args of PJRT_Client_Compile; the program text is only read.
        unsafe { api.client_compile(&mut a) }?;
        if a.executable.is_null() {
            return Err(api.error(sys::CLIENT_COMPILE.name, -1, "returned a NULL executable"));
        }
        let mut exe = PjrtExecutable {
            raw: a.executable,
            client: self.clone(),
            outputs: 0,
            params: signature(mlir),
        };
        exe.outputs = exe.count_outputs()?;
        Ok(exe)
    }
}

impl PjrtExecutable {
    /// How many outputs the program has.
    pub fn num_outputs(&self) -> usize {
        self.outputs
    }

    fn count_outputs(&self) -> Result<usize, Error> {
        let api = self.client.api();
        let mut g = sys::LoadedExecutable_GetExecutable_Args::new();
        g.loaded_executable = self.raw;
        // SAFETY: the args of PJRT_LoadedExecutable_GetExecutable.
        unsafe { api.loaded_executable_get_executable(&mut g) }?;
        if g.executable.is_null() {
            return Err(api.error(
                sys::LOADED_EXECUTABLE_GET_EXECUTABLE.name,
                -1,
                "returned NULL",
            ));
        }
        let mut n = sys::Executable_NumOutputs_Args::new();
        n.executable = g.executable;
        // SAFETY: the args of PJRT_Executable_NumOutputs.
        let counted = unsafe { api.executable_num_outputs(&mut n) };
        let mut d = sys::Executable_Destroy_Args::new();
        d.executable = g.executable;
        // SAFETY: the executable GetExecutable gave us, destroyed once, here.
        let destroyed = unsafe { api.executable_destroy(&mut d) };
        counted.and(destroyed)?;
        if n.num_outputs > 4096 {
            return Err(api.error(
                sys::EXECUTABLE_NUM_OUTPUTS.name,
                -1,
                &format!("returned {}", n.num_outputs),
            ));
        }
        Ok(n.num_outputs)
    }

    /// Runs the program once on `args` (buffers of this client, on the device it was compiled
    /// for), no input donated; waits for completion and returns the outputs.
    /// A buffer of another client is refused (naming its position): the plugin would read a
    /// foreign `PJRT_Buffer*` as its own. So is a buffer whose element type or dims differ
    /// from the parameter the program text declares.
    pub fn execute(&self, args: &[&PjrtBuffer]) -> Result<Vec<PjrtBuffer>, Error> {
        let api = *self.client.api();
        if let Some(i) = args.iter().position(|b| !b.client().same(&self.client)) {
            let other = args[i].client();
            return Err(api.error(
                sys::LOADED_EXECUTABLE_EXECUTE.name,
                -1,
                &format!(
                    "argument {i} is a buffer of another client (platform \"{}\" from {}), \
                     and an executable runs on buffers of its own client only: import the data \
                     into the executable's client (PjrtClient::import)",
                    other.platform(),
                    other.plugin().origin()
                ),
            ));
        }
        self.check_params(args)?;
        let raw_args: Vec<*mut sys::PJRT_Buffer> = args.iter().map(|b| b.owned.raw).collect();
        let lists: [*const *mut sys::PJRT_Buffer; 1] = [raw_args.as_ptr()];
        let mut outs: Vec<*mut sys::PJRT_Buffer> = vec![std::ptr::null_mut(); self.outputs];
        let out_lists: [*mut *mut sys::PJRT_Buffer; 1] = [outs.as_mut_ptr()];
        let mut events: [*mut sys::PJRT_Event; 1] = [std::ptr::null_mut()];
        // No input is donated: an imported view's memory is read, never reused for a result.
        let keep: Vec<i64> = (0..args.len() as i64).collect();
        let mut options = sys::ExecuteOptions {
            head: sys::Head {
                struct_size: sys::ExecuteOptions::STRUCT_SIZE,
                extension_start: std::ptr::null_mut(),
            },
            send_callbacks: std::ptr::null_mut(),
            recv_callbacks: std::ptr::null_mut(),
            num_send_ops: 0,
            num_recv_ops: 0,
            launch_id: 0,
            non_donatable_input_indices: keep.as_ptr(),
            num_non_donatable_input_indices: keep.len(),
            context: std::ptr::null_mut(),
            call_location: std::ptr::null(),
            num_tasks: 0,
            task_ids: std::ptr::null_mut(),
            incarnation_ids: std::ptr::null_mut(),
        };
        let mut a = sys::LoadedExecutable_Execute_Args::new();
        a.executable = self.raw;
        a.options = &mut options;
        a.argument_lists = lists.as_ptr();
        a.num_devices = 1;
        a.num_args = args.len();
        a.output_lists = out_lists.as_ptr();
        a.device_complete_events = events.as_mut_ptr();
        // SAFETY: the args of PJRT_LoadedExecutable_Execute: one device's argument list
        // (buffers held by `args`) and an output list of `num_outputs` slots.
        unsafe { api.loaded_executable_execute(&mut a) }?;
        // Adopt every output first, so that each is destroyed once whatever fails next.
        let adopted: Vec<Result<PjrtBuffer, Error>> = outs
            .iter()
            .map(|&o| PjrtBuffer::adopt(&self.client, o, sys::LOADED_EXECUTABLE_EXECUTE.name))
            .collect();
        if !events[0].is_null() {
            // SAFETY: the completion event we own.
            unsafe { await_event(&api, events[0]) }?;
        }
        adopted.into_iter().collect()
    }

    /// Each argument's element type and dims against the parameter the program text declares
    /// (where dlport read them all): a mismatch is refused, naming both, before the plugin
    /// sees it.
    fn check_params(&self, args: &[&PjrtBuffer]) -> Result<(), Error> {
        let Some(params) = &self.params else {
            return Ok(());
        };
        let refuse = |what: String| {
            self.client
                .api()
                .error(sys::LOADED_EXECUTABLE_EXECUTE.name, -1, &what)
        };
        if params.len() != args.len() {
            return Err(refuse(format!(
                "the program's @main takes {} parameters; {} arguments were given",
                params.len(),
                args.len()
            )));
        }
        for (i, (p, b)) in params.iter().zip(args).enumerate() {
            let (dtype, shape) = b.dtype_and_shape()?;
            let same_type = p.dtype.is_none_or(|t| t == dtype);
            let same_dims = p.dims.len() == shape.len()
                && p.dims
                    .iter()
                    .zip(&shape)
                    .all(|(d, s)| d.is_none_or(|d| d == *s));
            if !(same_type && same_dims) {
                let given: Vec<Option<i64>> = shape.iter().map(|&s| Some(s)).collect();
                return Err(refuse(format!(
                    "argument {i} is {}, and the program's parameter {i} is {}: give a buffer \
                     of the parameter's type and shape",
                    describe(Some(dtype), &given),
                    describe(p.dtype, &p.dims)
                )));
            }
        }
        Ok(())
    }

    /// The raw `PJRT_LoadedExecutable*`, valid while `self` lives.
    pub fn as_raw(&self) -> *mut c_void {
        self.raw.cast()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_of_main() {
        let int4 = DataType::new(dlport_core::abi::TypeCode::INT, 4, 1);
        let sig = signature(
            "func.func public @main(%x: tensor<2x3xf32> {a = [1, 2]}, %y: tensor<?x4xi4>, \
             %z: tensor<complex<f64>>, %w: tensor<8xui16>) -> tensor<2x3xf32>",
        )
        .unwrap();
        assert_eq!(sig[0].dtype, Some(DataType::FLOAT32));
        assert_eq!(sig[0].dims, [Some(2), Some(3)]);
        assert_eq!(
            (sig[1].dtype, &sig[1].dims[..]),
            (Some(int4), &[None, Some(4)][..])
        );
        assert_eq!(
            (sig[2].dtype, sig[2].dims.len()),
            (Some(DataType::COMPLEX128), 0)
        );
        assert_eq!(sig[3].dtype, Some(DataType::UINT16));
        assert_eq!(signature("func.func @main() -> ()"), Some(Vec::new()));
        assert_eq!(signature("func.func @main(%t: tuple<f32>)"), None);
        assert_eq!(signature("func.func @other(%t: tensor<f32>)"), None);
    }
}
