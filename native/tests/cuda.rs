//! CUDA tests, under `dlport_testkit::harness`: where no CUDA driver is present (or the `cuda`
//! feature is off) each test prints SKIPPED with the reason and counts as skipped, never as
//! passed. The closing line reads "cuda: N passed, N failed, N skipped".

use dlport_testkit::harness::{self, Check};

#[cfg(feature = "cuda")]
mod gpu {
    use dlport_core::abi::DeviceType;
    use dlport_core::backend::{Backend, StreamRequest};
    use dlport_core::{
        CopyPolicy, DataType, Device, ExportBuilder, ExportOptions, ImportOptions, Registry,
    };
    use dlport_native::cuda::{self, CudaBackend};

    fn backend() -> CudaBackend {
        CudaBackend::new().expect("probe succeeded before the tests ran")
    }

    pub fn device_buffers_are_zeroed_and_round_trip() -> Result<(), String> {
        let b = backend();
        let t = b
            .zeros(Device::cuda(0), DataType::FLOAT32, &[1024])
            .map_err(|e| e.to_string())?;
        let host = b
            .copy(&t.view().unwrap().tensor_ref(), Device::cpu())
            .map_err(|e| e.to_string())?
            .unwrap();
        if host.to_vec::<f32>().unwrap().iter().any(|&x| x != 0.0) {
            return Err("fresh device memory is not zeroed".into());
        }
        let src =
            ExportBuilder::from_vec((0..4096).map(|i| i as f32).collect::<Vec<_>>(), &[64, 64])
                .build()
                .unwrap();
        let dev = b
            .copy(&src.view(), Device::cuda(0))
            .map_err(|e| e.to_string())?
            .unwrap();
        let back = b
            .copy(&dev.view().unwrap().tensor_ref(), Device::cpu())
            .map_err(|e| e.to_string())?
            .unwrap();
        if back.to_vec::<f32>().unwrap() != src.view().to_vec::<f32>().unwrap() {
            return Err("H2D then D2H changed the data".into());
        }
        Ok(())
    }

    pub fn strided_host_tensors_upload_compacted() -> Result<(), String> {
        let b = backend();
        let src = ExportBuilder::from_vec((0..6).collect::<Vec<i32>>(), &[2, 3])
            .strides(&[1, 2])
            .build()
            .unwrap();
        let dev = b
            .copy(&src.view(), Device::cuda(0))
            .map_err(|e| e.to_string())?
            .unwrap();
        let back = b
            .copy(&dev.view().unwrap().tensor_ref(), Device::cpu())
            .map_err(|e| e.to_string())?
            .unwrap();
        let v = back.to_vec::<i32>().unwrap();
        if v != [0, 2, 4, 1, 3, 5] {
            return Err(format!("got {v:?}"));
        }
        Ok(())
    }

    pub fn cuda_tensors_import_as_views_and_export_keeps_them_alive() -> Result<(), String> {
        let registry = dlport_native::registry();
        let cuda = registry
            .get("cuda")
            .ok_or("cuda backend not registered")?
            .clone();
        let t = cuda
            .allocate(Device::cuda(0), DataType::UINT8, &[4096])
            .map_err(|e| e.to_string())?;
        let exported = registry
            .to_dlpack(&t, &ExportOptions::versioned())
            .map_err(|e| e.to_string())?;
        let imported = registry
            .from_dlpack(
                exported,
                &ImportOptions {
                    copy: CopyPolicy::Never,
                    ..Default::default()
                },
            )
            .map_err(|e| e.to_string())?;
        if imported.buffer().ptr() != t.buffer().ptr() {
            return Err("import copied".into());
        }
        if t.buffer().users() != 1 {
            return Err(format!("users = {}", t.buffer().users()));
        }
        drop(t);
        // The import still holds the device memory: reading it back works.
        let host = registry
            .from_dlpack(
                registry
                    .to_dlpack(&imported, &ExportOptions::legacy())
                    .map_err(|e| e.to_string())?,
                &ImportOptions {
                    device: Some(Device::cpu()),
                    ..Default::default()
                },
            )
            .map_err(|e| e.to_string())?;
        if host.to_vec::<u8>().unwrap().len() != 4096 {
            return Err("bad length".into());
        }
        Ok(())
    }

    pub fn pinned_memory_is_cuda_host() -> Result<(), String> {
        let p = dlport_native::pinned::PinnedBackend::new();
        if p.device() != Device::cuda_host() {
            return Err(format!("pinned device is {}", p.device()));
        }
        let t = p
            .zeros(DataType::FLOAT64, &[512])
            .map_err(|e| e.to_string())?;
        if t.device().device_type != DeviceType::CUDA_HOST {
            return Err("not kDLCUDAHost".into());
        }
        Ok(())
    }

    pub fn stream_hand_off_orders_work() -> Result<(), String> {
        let b = backend();
        for request in [
            StreamRequest::LegacyDefault,
            StreamRequest::PerThreadDefault,
            StreamRequest::NoSync,
        ] {
            b.hand_off(Device::cuda(0), 1, request)
                .map_err(|e| format!("{request}: {e}"))?;
        }
        let t = b
            .zeros(Device::cuda(0), DataType::FLOAT32, &[16])
            .map_err(|e| e.to_string())?;
        // The registry's export makes the hand-off, through the backend that holds the tensor.
        let mut registry = Registry::with_cpu();
        registry
            .register(std::sync::Arc::new(b))
            .map_err(|e| e.to_string())?;
        let with_stream = |stream| ExportOptions {
            stream,
            ..ExportOptions::default()
        };
        for stream in [None, Some(1), Some(2), Some(-1)] {
            registry
                .to_dlpack(&t, &with_stream(stream))
                .map_err(|e| format!("stream {stream:?}: {e}"))?;
        }
        if registry.to_dlpack(&t, &with_stream(Some(0))).is_ok() {
            return Err("stream 0 accepted".into());
        }
        Ok(())
    }

    pub fn all() -> Vec<(&'static str, super::Check)> {
        vec![
            (
                "device_buffers_are_zeroed_and_round_trip",
                device_buffers_are_zeroed_and_round_trip,
            ),
            (
                "strided_host_tensors_upload_compacted",
                strided_host_tensors_upload_compacted,
            ),
            (
                "cuda_tensors_import_as_views_and_export_keeps_them_alive",
                cuda_tensors_import_as_views_and_export_keeps_them_alive,
            ),
            ("pinned_memory_is_cuda_host", pinned_memory_is_cuda_host),
            ("stream_hand_off_orders_work", stream_hand_off_orders_work),
        ]
    }

    pub fn unavailable() -> Option<String> {
        cuda::probe().err().map(|e| e.to_string())
    }
}

fn main() {
    #[cfg(feature = "cuda")]
    let (tests, why_not) = (gpu::all(), gpu::unavailable());
    #[cfg(not(feature = "cuda"))]
    let (tests, why_not): (Vec<(&str, Check)>, Option<String>) = (
        [
            "device_buffers_are_zeroed_and_round_trip",
            "strided_host_tensors_upload_compacted",
            "cuda_tensors_import_as_views_and_export_keeps_them_alive",
            "pinned_memory_is_cuda_host",
            "stream_hand_off_orders_work",
        ]
        .into_iter()
        .map(|n| (n, (|| Ok(())) as Check))
        .collect(),
        Some("built without the `cuda` feature".to_string()),
    );
    harness::run("cuda", &tests, why_not.as_deref());
}
