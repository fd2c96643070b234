//! Bad share descriptors and forged fds: every one is an error that names the field and the
//! value, and none of them maps anything (the mapping counts do not move).

use dlport_native::dlport_core::{DataType, Device, Error};
use dlport_native::share::{Descriptor, HandleKind};

fn good() -> Descriptor {
    Descriptor {
        kind: HandleKind::Memfd,
        device: Device::cpu(),
        dtype: DataType::FLOAT32,
        shape: vec![4, 5, 6],
        strides: vec![30, 6, 1],
        byte_offset: 0,
        byte_len: 480,
        flags: 0,
        handle: Vec::new(),
    }
}

fn parse_err(bytes: &[u8]) -> String {
    match Descriptor::from_bytes(bytes) {
        Ok(d) => panic!("parsed {d:?} from bad bytes"),
        Err(e) => {
            // A descriptor's own fields are refused with InvalidValue (code 41,
            // DLPORT_ERR_INVALID_VALUE); the tensor inside with the core's DLPack rules.
            assert!(
                e.code() == 41 || matches!(e, dlport_core::Error::Layout(_)),
                "{e}"
            );
            e.to_string()
        }
    }
}

fn patched(at: usize, value: &[u8]) -> Vec<u8> {
    let mut b = good().to_bytes().unwrap();
    b[at..at + value.len()].copy_from_slice(value);
    b
}

#[test]
fn truncated_bytes_at_every_length_are_refused() {
    let bytes = good().to_bytes().unwrap();
    for cut in 0..bytes.len() {
        let e = parse_err(&bytes[..cut]);
        assert!(
            e.contains("descriptor length") || e.contains("descriptor.magic"),
            "cut {cut}: {e}"
        );
    }
    assert_eq!(Descriptor::from_bytes(&bytes).unwrap(), good());
}

#[test]
fn each_bad_field_is_named_with_its_value() {
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (patched(0, b"XLPS"), "descriptor.magic = "),
        (
            patched(4, &2u16.to_le_bytes()),
            "descriptor.version = 2 is invalid",
        ),
        (
            patched(4, &u16::MAX.to_le_bytes()),
            "descriptor.version = 65535",
        ),
        (patched(6, &3u16.to_le_bytes()), "descriptor.kind = 3"),
        (patched(8, &2u32.to_le_bytes()), "descriptor.fd_count = 2"),
        (
            patched(12, &65u32.to_le_bytes()),
            "ndim = 65 is out of range",
        ),
        (
            patched(16, &2i32.to_le_bytes()),
            "descriptor.device_type = 2",
        ),
        (patched(24, &[99]), "dtype.code = 99"),
        (patched(25, &[33]), "dtype.bits = 33"),
        (
            patched(28, &64u32.to_le_bytes()),
            "descriptor.handle_len = 64",
        ),
        (patched(32, &8u64.to_le_bytes()), "flags = 0x8"),
        (
            patched(40, &4u64.to_le_bytes()),
            "needs 484 bytes, but the storage has 480",
        ),
        (
            patched(48, &479u64.to_le_bytes()),
            "needs 480 bytes, but the storage has 479",
        ),
        (
            patched(48, &u64::MAX.to_le_bytes()),
            "descriptor.byte_len = 18446744073709551615",
        ),
        (
            patched(56, &(-4i64).to_le_bytes()),
            "shape[0] = -4 is negative",
        ),
        (
            patched(56 + 24, &i64::MAX.to_le_bytes()),
            "strides[0] = 9223372036854775807",
        ),
    ];
    for (bytes, want) in cases {
        let e = parse_err(&bytes);
        assert!(e.contains(want), "wanted {want:?} in: {e}");
    }
    let mut long = good().to_bytes().unwrap();
    long.extend_from_slice(&[0; 8]);
    let e = parse_err(&long);
    assert!(
        e.contains("descriptor length = 112") && e.contains("follow"),
        "{e}"
    );
}

#[test]
fn a_read_only_cuda_ipc_descriptor_is_refused() {
    // CUDA IPC maps the memory writable in every process that opens it: READ_ONLY could not
    // be kept, so no dlport producer writes such a descriptor and no consumer takes one.
    let cuda = Descriptor {
        kind: HandleKind::CudaIpc,
        device: Device::cuda(0),
        handle: vec![7; 64],
        ..good()
    };
    let mut bytes = cuda.to_bytes().unwrap();
    assert_eq!(Descriptor::from_bytes(&bytes).unwrap(), cuda);
    bytes[32] = 1;
    let e = parse_err(&bytes);
    assert!(
        e.contains("descriptor.flags = 1") && e.contains("CUDA IPC maps the memory writable"),
        "{e}"
    );
    let ro = Descriptor { flags: 1, ..cuda };
    assert!(ro.validate().is_err() && ro.to_bytes().is_err());
}

#[test]
fn random_corruptions_parse_only_into_valid_descriptors() {
    let base = good().to_bytes().unwrap();
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut accepted = 0;
    for _ in 0..50_000 {
        let mut b = base.clone();
        for _ in 0..1 + next() % 4 {
            let i = (next() % b.len() as u64) as usize;
            b[i] ^= 1 << (next() % 8);
        }
        if let Ok(d) = Descriptor::from_bytes(&b) {
            accepted += 1;
            let layout = d.validate().expect("a parsed descriptor validates");
            if layout.numel != 0 {
                assert!(
                    i128::from(d.byte_offset) + i128::from(layout.span.hi)
                        <= i128::from(d.byte_len),
                    "{d:?}"
                );
            }
            // IS_COPIED never travels: it is dropped when parsing.
            b[32] &= !2;
            assert_eq!(
                d.to_bytes().unwrap(),
                b,
                "parsing is not the inverse of writing"
            );
        }
    }
    // Some flips land in values that stay valid (a stride of an extent-1 axis, an offset).
    assert!(accepted > 0 && accepted < 50_000, "accepted {accepted}");
}

#[cfg(target_os = "linux")]
mod fds {
    use std::io::Write;
    use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::net::UnixStream;

    use super::*;
    use dlport_native::dlport_core::ExportBuilder;
    use dlport_native::dlport_core::backend::Access;
    use dlport_native::share::{self, Shared, mapping_counts};

    /// The tests below count open fds and mappings of the whole process: one at a time.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn memfd(len: i64, seals: i32, allow_sealing: bool) -> OwnedFd {
        let flags = libc::MFD_CLOEXEC
            | if allow_sealing {
                libc::MFD_ALLOW_SEALING
            } else {
                0
            };
        // SAFETY: a NUL-terminated name.
        let raw = unsafe { libc::memfd_create(c"forged".as_ptr(), flags) };
        assert!(raw >= 0);
        // SAFETY: just created, owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: sizes and seals the file we own.
        unsafe {
            assert_eq!(libc::ftruncate(raw, len), 0);
            if seals != 0 {
                assert_eq!(libc::fcntl(raw, libc::F_ADD_SEALS, seals), 0);
            }
        }
        fd
    }

    fn open_err(d: &Descriptor, fd: &impl AsFd) -> String {
        let before = mapping_counts();
        let e = match share::open(d, &[fd.as_fd()]) {
            Ok(_) => panic!("a forged fd was opened"),
            Err(e) => e,
        };
        assert_eq!(mapping_counts(), before, "a refused open mapped memory");
        e.to_string()
    }

    #[test]
    fn forged_fds_are_refused_before_anything_is_mapped() {
        let _serial = serial();
        let d = good();
        let mut ends = [0i32; 2];
        // SAFETY: pipe writes two new descriptors into the array.
        assert_eq!(unsafe { libc::pipe(ends.as_mut_ptr()) }, 0);
        // SAFETY: just created, owned by nobody else.
        let (r, _w) = unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) };
        let e = open_err(&d, &r);
        assert!(
            e.contains("fstat failed with code 4096") && e.contains("not a memfd"),
            "{e}"
        );
        let null = std::fs::File::open("/dev/null").unwrap();
        let e = open_err(&d, &null);
        assert!(e.contains("code 8192") && e.contains("not a memfd"), "{e}");
        let dir = std::env::temp_dir().join(format!("dlport-share-{}", std::process::id()));
        let mut file = std::fs::File::create(&dir).unwrap();
        file.write_all(&[0; 480]).unwrap();
        let e = open_err(&d, &file);
        std::fs::remove_file(&dir).unwrap();
        assert!(e.contains("F_GET_SEALS") && e.contains("no seals"), "{e}");
        // A memfd that may still shrink (unsealed, or sealed only against growing).
        for fd in [
            memfd(480, 0, true),
            memfd(480, libc::F_SEAL_GROW, true),
            memfd(480, 0, false),
        ] {
            let e = open_err(&d, &fd);
            assert!(e.contains("not sealed against shrinking"), "{e}");
        }
        // A sealed memfd smaller than the descriptor says.
        let small = memfd(400, libc::F_SEAL_SHRINK, true);
        assert_eq!(
            share::open(&d, &[small.as_fd()]).unwrap_err(),
            Error::Layout(dlport_core::error::LayoutError::StorageTooSmall {
                needed: 480,
                available: 400
            })
        );
        // The wrong number of fds.
        let ok = memfd(480, libc::F_SEAL_SHRINK, true);
        let e = share::open(&d, &[ok.as_fd(), ok.as_fd()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("fd count = 2"), "{e}");
        assert!(
            share::open(&d, &[])
                .unwrap_err()
                .to_string()
                .contains("fd count = 0")
        );
        // And the right fd opens.
        let t = share::open(&d, &[ok.as_fd()]).unwrap();
        assert_eq!(t.view().shape(), &[4, 5, 6]);
        assert_eq!(t.access(), Access::Shared);
    }

    #[test]
    fn a_read_only_fd_or_a_write_seal_gives_a_read_only_tensor() {
        let _serial = serial();
        let d = good();
        let fd = memfd(480, libc::F_SEAL_SHRINK, true);
        let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
        let ro = std::fs::File::open(path).unwrap();
        let t = share::open(&d, &[ro.as_fd()]).unwrap();
        assert!(t.is_read_only());
        let sealed = memfd(480, libc::F_SEAL_SHRINK | libc::F_SEAL_WRITE, true);
        let t = share::open(&d, &[sealed.as_fd()]).unwrap();
        assert!(t.is_read_only());
        assert_eq!(t.as_slice::<f32>().unwrap().len(), 120);
    }

    #[test]
    fn read_only_shares_hand_out_a_read_only_fd() {
        let _serial = serial();
        let t = share::alloc(DataType::UINT8, &[64]).unwrap();
        let opts = share::ShareOptions {
            read_only: true,
            ..Default::default()
        };
        let s = share::share(&t.view(), &opts).unwrap();
        // SAFETY: F_GETFL reads the status flags of an fd we own.
        let mode = unsafe { libc::fcntl(s.fds()[0].as_raw_fd(), libc::F_GETFL) } & libc::O_ACCMODE;
        assert_eq!(
            mode,
            libc::O_RDONLY,
            "the peer could map the memory writable"
        );
        let opened = s.open().unwrap();
        assert!(opened.is_read_only());
    }

    fn seals_of(fd: &impl AsFd) -> i32 {
        // SAFETY: F_GET_SEALS only reads the seals of an open fd.
        unsafe { libc::fcntl(fd.as_fd().as_raw_fd(), libc::F_GET_SEALS) }
    }

    const FIXED: i32 = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;

    #[test]
    fn every_share_is_sealed_and_a_read_only_one_against_writes() {
        let _serial = serial();
        let ro = share::ShareOptions {
            read_only: true,
            ..Default::default()
        };
        // dlport's memfd, zero copy: FUTURE_WRITE (the producer's mapping keeps writing).
        let t = share::alloc(DataType::UINT8, &[64]).unwrap();
        let s = share::share(&t.view(), &ro).unwrap();
        assert_eq!(seals_of(&s.fds()[0]), FIXED | libc::F_SEAL_FUTURE_WRITE);
        assert!(!s.is_copy());
        // A second read-only share of it needs nothing more: the same memfd, no copy.
        let again = share::share(&t.view(), &ro).unwrap();
        assert!(!again.is_copy());
        // A writable share of it is a copy now (its peers could not write the original).
        let w = share::share(&t.view(), &Default::default()).unwrap();
        assert!(w.is_copy());
        assert_eq!(seals_of(&w.fds()[0]), FIXED);
        // Foreign memory: a copy sealed against every write.
        let v = ExportBuilder::from_vec(vec![1u8; 100], &[100])
            .build()
            .unwrap();
        let c = share::share(&v.view(), &ro).unwrap();
        assert!(c.is_copy());
        assert_eq!(seals_of(&c.fds()[0]), FIXED | libc::F_SEAL_WRITE);
        let w = share::share(&v.view(), &Default::default()).unwrap();
        assert_eq!(seals_of(&w.fds()[0]), FIXED);
        // An empty tensor travels sealed too.
        let empty = share::alloc(DataType::FLOAT32, &[0, 3]).unwrap();
        let e = share::share(&empty.view(), &ro).unwrap();
        assert_eq!(
            seals_of(&e.fds()[0]) & libc::F_SEAL_WRITE,
            libc::F_SEAL_WRITE
        );
        assert_eq!(e.open().unwrap().view().shape(), &[0, 3]);
        // A read-only share re-shared by the process that opened it: the same sealed memfd.
        let opened = s.open().unwrap();
        let on = share::share(&opened.view(), &Default::default()).unwrap();
        assert!(!on.is_copy() && on.descriptor().flags & 1 == 1, "{on:?}");
    }

    #[test]
    fn a_read_only_descriptor_whose_memfd_is_not_write_sealed_is_refused() {
        let _serial = serial();
        let d = Descriptor { flags: 1, ..good() };
        // A hostile producer's "read-only" shares: an unsealed memfd, its O_RDONLY reopen (a
        // read-only fd the peer can reopen writable), one sealed against everything but writes.
        let plain = memfd(480, libc::F_SEAL_SHRINK, true);
        let reopened = std::fs::File::open(format!("/proc/self/fd/{}", plain.as_raw_fd())).unwrap();
        let fixed = memfd(480, FIXED, true);
        for fd in [plain.as_fd(), reopened.as_fd(), fixed.as_fd()] {
            let e = open_err(&d, &fd);
            assert!(
                e.contains("says READ_ONLY") && e.contains("no write seal"),
                "{e}"
            );
        }
        // Either write seal is what READ_ONLY promises.
        for seal in [libc::F_SEAL_WRITE, libc::F_SEAL_FUTURE_WRITE] {
            let fd = memfd(480, libc::F_SEAL_SHRINK | seal, true);
            let t = share::open(&d, &[fd.as_fd()]).unwrap();
            assert!(t.is_read_only());
            assert_eq!(t.access(), Access::ReadOnly);
        }
    }

    fn open_fds() -> usize {
        std::fs::read_dir("/proc/self/fd").unwrap().count()
    }

    #[test]
    fn bad_frames_close_the_fds_that_came_with_them() {
        let _serial = serial();
        let t = ExportBuilder::from_vec(vec![1u8; 16], &[16])
            .build()
            .unwrap();
        let s = share::share(&t.view(), &Default::default()).unwrap();
        let baseline = open_fds();
        let (a, b) = UnixStream::pair().unwrap();
        // A good frame with a descriptor from the future: refused, its fd closed.
        let mut bytes = s.descriptor().to_bytes().unwrap();
        bytes[4] = 9;
        send_raw(&a, &bytes, &[s.fds()[0].as_raw_fd(); 1]);
        let e = Shared::recv(&b).unwrap_err().to_string();
        assert!(e.contains("descriptor.version = 9"), "{e}");
        assert_eq!(open_fds(), baseline + 2, "the received fd leaked");
        // Two fds for a descriptor that takes one.
        let good = s.descriptor().to_bytes().unwrap();
        send_raw(&a, &good, &[s.fds()[0].as_raw_fd(); 2]);
        let e = Shared::recv(&b).unwrap_err().to_string();
        assert!(e.contains("fd count = 2"), "{e}");
        assert_eq!(open_fds(), baseline + 2);
        // Five fds: more than a frame may carry; the kernel drops some, dlport closes the rest.
        send_raw(&a, &good, &[s.fds()[0].as_raw_fd(); 5]);
        let e = Shared::recv(&b).unwrap_err().to_string();
        assert!(e.contains("more than 4 fds"), "{e}");
        assert_eq!(open_fds(), baseline + 2);
        // A length past DESCRIPTOR_MAX, then a peer that hangs up mid-frame.
        (&a).write_all(&100_000u32.to_le_bytes()).unwrap();
        let e = Shared::recv(&b).unwrap_err().to_string();
        assert!(e.contains("descriptor length = 100000"), "{e}");
        (&a).write_all(&[88, 0, 0, 0, 1, 2]).unwrap();
        drop(a);
        let e = Shared::recv(&b).unwrap_err().to_string();
        assert!(e.contains("closed the socket in the middle"), "{e}");
        // The fds sent with the good share still open it.
        assert_eq!(s.open().unwrap().as_slice::<u8>().unwrap(), &[1; 16]);
    }

    /// Sends one frame with `fds` attached, as a (possibly hostile) peer would.
    fn send_raw(sock: &UnixStream, bytes: &[u8], fds: &[i32]) {
        let mut frame = (bytes.len() as u32).to_le_bytes().to_vec();
        frame.extend_from_slice(bytes);
        let mut control = vec![0u64; 16];
        let mut iov = libc::iovec {
            iov_base: frame.as_mut_ptr().cast(),
            iov_len: frame.len(),
        };
        // SAFETY: all-zero is a valid msghdr; the header and data written below fit in the
        // 128-byte control buffer (at most 5 fds); sendmsg reads live buffers.
        unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = libc::CMSG_SPACE((fds.len() * 4) as u32) as _;
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN((fds.len() * 4) as u32) as _;
            for (i, fd) in fds.iter().enumerate() {
                libc::CMSG_DATA(c).cast::<i32>().add(i).write_unaligned(*fd);
            }
            assert_eq!(
                libc::sendmsg(sock.as_raw_fd(), &msg, 0),
                frame.len() as isize
            );
        }
    }
}
