//! [`PjrtExecutable`]: a StableHLO program (MLIR text) compiled by the plugin
//! (`PJRT_Client_Compile`) and run on PJRT buffers (`PJRT_LoadedExecutable_Execute`), no
//! input donated, so an imported view is only read.

use std::ffi::{c_char, c_void};

use dlport_core::Error;

use super::buffer::{PjrtBuffer, await_event};
use super::client::PjrtClient;
use super::sys;

/// A serialized `xla.CompileOptionsProto`: `executable_build_options` (field 3) with
/// `num_replicas` (field 4) = 1 and `num_partitions` (field 5) = 1, one device.
const COMPILE_OPTIONS: &[u8] = &[0x1a, 0x04, 0x20, 0x01, 0x28, 0x01];

/// A compiled program, destroyed once when dropped.
pub struct PjrtExecutable {
    raw: *mut sys::PJRT_LoadedExecutable,
    client: PjrtClient,
    outputs: usize,
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
        let _ = unsafe {
            self.client
                .api()
                .call(sys::LOADED_EXECUTABLE_DESTROY, &mut a)
        };
    }
}

impl PjrtClient {
    /// Compiles a StableHLO (or MHLO) program given as MLIR text, for one device.
    pub fn compile_mlir(&self, mlir: &str) -> Result<PjrtExecutable, Error> {
        let api = *self.api();
        let format = "mlir";
        let program = sys::Program {
            head: sys::Head {
                struct_size: std::mem::size_of::<sys::Program>(),
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
        unsafe { api.call(sys::CLIENT_COMPILE, &mut a) }?;
        if a.executable.is_null() {
            return Err(api.error(sys::CLIENT_COMPILE.name, -1, "returned a NULL executable"));
        }
        let mut exe = PjrtExecutable {
            raw: a.executable,
            client: self.clone(),
            outputs: 0,
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
        unsafe { api.call(sys::LOADED_EXECUTABLE_GET_EXECUTABLE, &mut g) }?;
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
        let counted = unsafe { api.call(sys::EXECUTABLE_NUM_OUTPUTS, &mut n) };
        let mut d = sys::Executable_Destroy_Args::new();
        d.executable = g.executable;
        // SAFETY: the executable GetExecutable gave us, destroyed once, here.
        let destroyed = unsafe { api.call(sys::EXECUTABLE_DESTROY, &mut d) };
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
    /// foreign `PJRT_Buffer*` as its own.
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
        let raw_args: Vec<*mut sys::PJRT_Buffer> = args.iter().map(|b| b.owned.raw).collect();
        let lists: [*const *mut sys::PJRT_Buffer; 1] = [raw_args.as_ptr()];
        let mut outs: Vec<*mut sys::PJRT_Buffer> = vec![std::ptr::null_mut(); self.outputs];
        let out_lists: [*mut *mut sys::PJRT_Buffer; 1] = [outs.as_mut_ptr()];
        let mut events: [*mut sys::PJRT_Event; 1] = [std::ptr::null_mut()];
        // No input is donated: an imported view's memory is read, never reused for a result.
        let keep: Vec<i64> = (0..args.len() as i64).collect();
        let mut options = sys::ExecuteOptions {
            head: sys::Head {
                struct_size: std::mem::size_of::<sys::ExecuteOptions>(),
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
        unsafe { api.call(sys::LOADED_EXECUTABLE_EXECUTE, &mut a) }?;
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

    /// The raw `PJRT_LoadedExecutable*`, valid while `self` lives.
    pub fn as_raw(&self) -> *mut c_void {
        self.raw.cast()
    }
}
