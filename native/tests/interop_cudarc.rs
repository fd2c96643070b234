//! The cudarc adapter against the real crate, under `dlport_testkit::harness`: where no CUDA driver
//! is present (or the `cudarc` feature is off) each test prints SKIPPED with the reason and
//! counts as skipped, never as passed. The closing line reads "N passed, N failed, N skipped".

use dlport_testkit::harness::{self, Check};

#[cfg(feature = "cudarc")]
mod gpu {
    use dlport_core::backend::StreamRequest;
    use dlport_core::{ExportBuilder, ManagedTensor};
    use dlport_native::cuda;
    use dlport_native::interop::cudarc::{export, export_builder, import};

    fn stream() -> std::sync::Arc<cudarc::driver::CudaStream> {
        cuda::context(0).expect("probe succeeded").default_stream()
    }

    pub fn slices_export_without_a_copy_and_come_back() -> Result<(), String> {
        let s = stream();
        let slice = s
            .clone_htod(&[1i32, 2, 3, 4, 5, 6])
            .map_err(|e| e.to_string())?;
        let ptr = {
            use cudarc::driver::DevicePtr;
            let (p, _r) = slice.device_ptr(&s);
            p
        };
        let t = export(slice, &[3, 2], StreamRequest::LegacyDefault).map_err(|e| e.to_string())?;
        let v = t.view();
        if v.shape() != [3, 2] || v.device() != dlport_core::Device::cuda(0) {
            return Err(format!("exported {:?} on {}", v.shape(), v.device()));
        }
        if v.data() as u64 != ptr {
            return Err("the export copied".into());
        }
        let view = import::<i32>(t, &s).map_err(|e| e.to_string())?;
        let host = s.clone_dtoh(&*view).map_err(|e| e.to_string())?;
        if host != [1, 2, 3, 4, 5, 6] {
            return Err(format!("read back {host:?}"));
        }
        Ok(())
    }

    pub fn imports_follow_the_aliasing_model_and_the_checks() -> Result<(), String> {
        let s = stream();
        let slice = s.clone_htod(&[0f32; 8]).map_err(|e| e.to_string())?;
        // dlport's own export of a slice it owns: exclusive, writable through cudarc.
        let t = export_builder(slice, &[8])
            .and_then(|b| b.build())
            .map_err(|e| e.to_string())?;
        let mut view = import::<f32>(t, &s).map_err(|e| e.to_string())?;
        s.memset_zeros(view.slice_mut().map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
        // Through a raw pointer (no IS_COPIED): shared, read-only for cudarc.
        let raw = view.into_tensor().into_raw();
        // SAFETY: a live tensor, handed over once.
        let t = unsafe { ManagedTensor::from_raw(raw) }.map_err(|e| e.to_string())?;
        let mut view = import::<f32>(t, &s).map_err(|e| e.to_string())?;
        match view.slice_mut() {
            Err(e) if e.code() == 35 => {}
            other => return Err(format!("shared tensor writable: {other:?}")),
        }
        // Wrong dtype, strided, host memory.
        let t = view.into_tensor();
        match import::<i32>(t, &s) {
            Err(e) if e.code() == 15 => {}
            other => return Err(format!("dtype: {other:?}")),
        }
        let slice = s.clone_htod(&[0u8; 12]).map_err(|e| e.to_string())?;
        let t = export_builder(slice, &[2, 3])
            .and_then(|b| b.strides(&[6, 1]).build())
            .map_err(|e| e.to_string())?;
        match import::<u8>(t, &s) {
            Err(e) if e.code() == 17 => {}
            other => return Err(format!("strided: {other:?}")),
        }
        let host = ExportBuilder::from_vec(vec![0u8; 4], &[4]).build().unwrap();
        match import::<u8>(host, &s) {
            Err(e) if e.code() == 41 && e.to_string().contains("device.device_type") => Ok(()),
            other => Err(format!("host tensor: {other:?}")),
        }
    }

    pub fn the_stream_hand_off_orders_the_consumer() -> Result<(), String> {
        let ctx = cuda::context(0).map_err(|e| e.to_string())?;
        let producer = ctx.new_stream().map_err(|e| e.to_string())?;
        let consumer = ctx.new_stream().map_err(|e| e.to_string())?;
        let slice = producer
            .clone_htod(&vec![7u8; 1 << 20])
            .map_err(|e| e.to_string())?;
        let request = StreamRequest::Stream(consumer.cu_stream() as usize);
        let t = export(slice, &[1 << 20], request).map_err(|e| e.to_string())?;
        let view = import::<u8>(t, &consumer).map_err(|e| e.to_string())?;
        let host = consumer.clone_dtoh(&*view).map_err(|e| e.to_string())?;
        if host.iter().any(|&b| b != 7) {
            return Err("the consumer read before the producer's copy finished".into());
        }
        Ok(())
    }
}

fn main() {
    #[cfg(feature = "cudarc")]
    let (tests, why_not): (Vec<(&str, Check)>, Option<String>) = (
        vec![
            (
                "slices_export_without_a_copy_and_come_back",
                gpu::slices_export_without_a_copy_and_come_back as Check,
            ),
            (
                "imports_follow_the_aliasing_model_and_the_checks",
                gpu::imports_follow_the_aliasing_model_and_the_checks,
            ),
            (
                "the_stream_hand_off_orders_the_consumer",
                gpu::the_stream_hand_off_orders_the_consumer,
            ),
        ],
        match dlport_native::cuda::probe() {
            Ok(0) => Some("no CUDA device is visible".to_string()),
            Ok(_) => None,
            Err(e) => Some(e.to_string()),
        },
    );
    #[cfg(not(feature = "cudarc"))]
    let (tests, why_not): (Vec<(&str, Check)>, Option<String>) = (
        [
            "slices_export_without_a_copy_and_come_back",
            "imports_follow_the_aliasing_model_and_the_checks",
            "the_stream_hand_off_orders_the_consumer",
        ]
        .into_iter()
        .map(|n| (n, (|| Ok(())) as Check))
        .collect(),
        Some("built without the `cudarc` feature".to_string()),
    );
    harness::run("cudarc adapter", &tests, why_not.as_deref());
}
