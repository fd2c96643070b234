//! The GPU check (feature `cuda`): a CPU → pinned → CUDA → pinned → CPU round trip with data
//! checks from 1 KiB to 1 GiB, the DLPack stream hand-off, and H2D / D2H bandwidth of pinned
//! against pageable memory.
//!
//! `cargo run --release -p dlport-native --features cuda --example gpu_check`

use std::time::Instant;

use cudarc::driver::{result, sys};
use dlport_core::backend::{Backend, CpuBackend, StreamRequest};
use dlport_core::{DataType, Device, Error};
use dlport_native::cuda::{self, CudaBackend, DeviceMemory, HostPinned};
use dlport_native::pinned::PinnedBackend;

fn pattern(i: usize, seed: u8) -> u8 {
    (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 12) as u8
}

fn main() -> Result<(), Error> {
    let cuda = CudaBackend::new()?;
    println!("CUDA devices: {}", cuda.device_count());
    let pinned = PinnedBackend::new();
    println!("pinned: {}", pinned.describe());

    println!("\n# round trip CPU → pinned → CUDA → pinned → CPU");
    let mut size = 1usize << 10;
    while size <= 1 << 30 {
        let seed = size.trailing_zeros() as u8;
        let cpu = CpuBackend::zeros(DataType::UINT8, &[size as i64])?;
        // SAFETY: a fresh host allocation of `size` bytes that only we reach.
        let bytes =
            unsafe { std::slice::from_raw_parts_mut(cpu.buffer().ptr().cast::<u8>(), size) };
        bytes
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = pattern(i, seed));
        let t0 = Instant::now();
        let p1 = pinned
            .copy(&cpu.view()?.tensor_ref(), pinned.device())?
            .expect("host → pinned");
        let dev = cuda
            .copy(&p1.view()?.tensor_ref(), Device::cuda(0))?
            .expect("pinned → cuda");
        let p2 = cuda
            .copy(&dev.view()?.tensor_ref(), Device::cuda_host())?
            .expect("cuda → pinned");
        let back = CpuBackend
            .copy(&p2.view()?.tensor_ref(), Device::cpu())?
            .expect("pinned → cpu");
        let dt = t0.elapsed();
        let guard = back.view()?;
        let out = guard.tensor_ref();
        let ok = out
            .as_bytes()?
            .iter()
            .enumerate()
            .all(|(i, &b)| b == pattern(i, seed));
        println!(
            "{:>10} bytes: {} in {:.3} ms",
            size,
            if ok { "ok" } else { "MISMATCH" },
            dt.as_secs_f64() * 1e3
        );
        if !ok {
            std::process::exit(1);
        }
        size <<= 2;
    }

    println!("\n# stream hand-off");
    let ctx = cuda::context(0)?;
    ctx.bind_to_thread()
        .map_err(|e| cuda::driver_error("cuCtxSetCurrent", e))?;
    let n = 256usize << 20;
    let dev = DeviceMemory::new(0, n)?;
    let host = HostPinned::new(&ctx, n)?;
    let producer = result::stream::create(result::stream::StreamKind::NonBlocking)
        .map_err(|e| cuda::driver_error("cuStreamCreate", e))?;
    let consumer = result::stream::create(result::stream::StreamKind::NonBlocking)
        .map_err(|e| cuda::driver_error("cuStreamCreate", e))?;
    let mut devmem = dev;
    let dptr =
        dlport_core::backend::TensorStorage::data_ptr(&mut devmem) as usize as sys::CUdeviceptr;
    let mut hostmem = host;
    let hptr = dlport_core::backend::TensorStorage::data_ptr(&mut hostmem).cast::<u8>();
    for value in [7u8, 9, 11] {
        // SAFETY: live device range and streams.
        unsafe { result::memset_d8_async(dptr, value, n, producer) }
            .map_err(|e| cuda::driver_error("cuMemsetD8Async", e))?;
        cuda.hand_off(
            Device::cuda(0),
            producer as usize,
            StreamRequest::Stream(consumer as usize),
        )?;
        // SAFETY: pinned host range of n bytes, live device range, live stream.
        let dst = unsafe { std::slice::from_raw_parts_mut(hptr, n) };
        // SAFETY: live device range of n bytes, host range of n bytes, live streams.
        unsafe { result::memcpy_dtoh_async(dst, dptr, consumer) }
            .map_err(|e| cuda::driver_error("cuMemcpyDtoHAsync", e))?;
        // SAFETY: live stream.
        unsafe { result::stream::synchronize(consumer) }
            .map_err(|e| cuda::driver_error("cuStreamSynchronize", e))?;
        let ok = dst.iter().all(|&b| b == value);
        println!(
            "consumer stream sees the producer's memset({value}) over {} MiB: {}",
            n >> 20,
            if ok { "ok" } else { "RACE" }
        );
        if !ok {
            std::process::exit(1);
        }
    }

    println!("\n# bandwidth (GB/s), 256 MiB, best of 5");
    let pageable = vec![1u8; n];
    let mut pageable_back = vec![0u8; n];
    // SAFETY: pinned host range of n bytes.
    let pinned_buf = unsafe { std::slice::from_raw_parts_mut(hptr, n) };
    let best = |f: &mut dyn FnMut() -> Result<(), Error>| -> Result<f64, Error> {
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            f()?;
            best = best.min(t.elapsed().as_secs_f64());
        }
        Ok(n as f64 / best / 1e9)
    };
    // SAFETY (all four closures): live device range of n bytes and host ranges of n bytes.
    let h2d_pinned = best(&mut || {
        // SAFETY: live device range of n bytes, host range of n bytes, live streams.
        unsafe { result::memcpy_htod_sync(dptr, &pinned_buf[..]) }
            .map_err(|e| cuda::driver_error("cuMemcpyHtoD", e))
    })?;
    let h2d_pageable = best(&mut || {
        // SAFETY: live device range of n bytes, host range of n bytes, live streams.
        unsafe { result::memcpy_htod_sync(dptr, &pageable[..]) }
            .map_err(|e| cuda::driver_error("cuMemcpyHtoD", e))
    })?;
    let d2h_pinned = best(&mut || {
        // SAFETY: live device range of n bytes, host range of n bytes, live streams.
        unsafe { result::memcpy_dtoh_sync(&mut pinned_buf[..], dptr) }
            .map_err(|e| cuda::driver_error("cuMemcpyDtoH", e))
    })?;
    let d2h_pageable = best(&mut || {
        // SAFETY: live device range of n bytes, host range of n bytes, live streams.
        unsafe { result::memcpy_dtoh_sync(&mut pageable_back[..], dptr) }
            .map_err(|e| cuda::driver_error("cuMemcpyDtoH", e))
    })?;
    println!(
        "H2D pinned   {h2d_pinned:>7.2}   pageable {h2d_pageable:>7.2}   ratio {:.2}",
        h2d_pinned / h2d_pageable
    );
    println!(
        "D2H pinned   {d2h_pinned:>7.2}   pageable {d2h_pageable:>7.2}   ratio {:.2}",
        d2h_pinned / d2h_pageable
    );
    // SAFETY: streams created above, no longer used.
    unsafe {
        let _ = result::stream::destroy(producer);
        let _ = result::stream::destroy(consumer);
    }
    println!("\ngpu check passed");
    Ok(())
}
