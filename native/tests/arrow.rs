//! Tensors through Arrow (feature `arrow`): `arrow.fixed_shape_tensor` columns without a copy in
//! both directions, the DLPack deleter run by Arrow's last buffer reference, refusals by name,
//! Arrow IPC streams, and (ignored unless run by `scripts/arrow-test.sh`, which installs
//! pyarrow) the same streams read and written by pyarrow.

use std::ffi::c_void;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use arrow_array::{Array, FixedSizeListArray};
use dlport_native::arrow::{
    EXTENSION_NAME, METADATA_KEY, NAME_KEY, from_arrow, read_ipc_stream, to_arrow, write_ipc_stream,
};
use dlport_native::dlport_core::backend::TensorStorage;
use dlport_native::dlport_core::{CopyPolicy, DataType, Error, ExportBuilder, ManagedTensor};

static DROPS: AtomicUsize = AtomicUsize::new(0);
/// The tests count releases through one counter: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// f32 storage that counts its release (the DLPack deleter frees it).
struct Counted(Vec<f32>);
impl Drop for Counted {
    fn drop(&mut self) {
        DROPS.fetch_add(1, Ordering::SeqCst);
    }
}
// SAFETY: a Vec's buffer does not move with it and is owned alone.
unsafe impl TensorStorage for Counted {
    fn data_ptr(&mut self) -> *mut c_void {
        self.0.as_mut_ptr().cast()
    }
    fn byte_len(&self) -> usize {
        self.0.len() * 4
    }
}

fn counted(shape: &[i64], strides: Option<&[i64]>) -> ManagedTensor {
    counted_in(shape.iter().product(), shape, strides)
}

/// As `counted`, over `n` elements of storage (0, 1, 2, …).
fn counted_in(n: i64, shape: &[i64], strides: Option<&[i64]>) -> ManagedTensor {
    let mut b = ExportBuilder::new(
        Counted((0..n).map(|i| i as f32).collect()),
        DataType::FLOAT32,
        shape,
    );
    if let Some(s) = strides {
        b = b.strides(s);
    }
    b.build().unwrap()
}

fn values(t: &ManagedTensor) -> Vec<f32> {
    t.view().to_vec::<f32>().unwrap()
}

#[test]
fn a_row_major_tensor_becomes_arrow_without_a_copy_and_arrow_releases_it() {
    let _s = serial();
    let before = DROPS.load(Ordering::SeqCst);
    let t = counted(&[3, 2, 4], None);
    let data = t.view().data() as usize;
    let (field, array) = to_arrow(t, "x", CopyPolicy::Never).unwrap();
    assert_eq!(array.len(), 3);
    assert_eq!(array.value_length(), 8);
    let values_ptr = array.values().to_data().buffers()[0].as_ptr() as usize;
    assert_eq!(values_ptr, data, "the Arrow buffer is the tensor's memory");
    let meta = field.metadata();
    assert_eq!(meta[NAME_KEY], EXTENSION_NAME);
    assert_eq!(meta[METADATA_KEY], r#"{"shape":[2,4]}"#);
    // Arrow holds the tensor: a clone of the array keeps it after the original is dropped.
    let clone: FixedSizeListArray = array.clone();
    drop(array);
    assert_eq!(
        DROPS.load(Ordering::SeqCst),
        before,
        "released while Arrow uses it"
    );
    // And back: a DLPack tensor over the Arrow buffer, no copy, read-only.
    let back = from_arrow(&field, &clone).unwrap();
    assert_eq!(back.view().shape(), &[3, 2, 4]);
    assert_eq!(back.view().data() as usize, data);
    assert!(back.is_read_only());
    assert_eq!(values(&back), (0..24).map(|i| i as f32).collect::<Vec<_>>());
    drop(clone);
    assert_eq!(
        DROPS.load(Ordering::SeqCst),
        before,
        "the DLPack view holds the buffer"
    );
    drop(back);
    assert_eq!(
        DROPS.load(Ordering::SeqCst),
        before + 1,
        "released exactly once"
    );
}

#[test]
fn inner_axes_dense_in_another_order_travel_with_a_permutation() {
    let _s = serial();
    // Two 3 × 4 matrices, each column-major.
    let t = counted(&[2, 3, 4], Some(&[12, 1, 3]));
    let want = values(&t);
    let data = t.view().data() as usize;
    let (field, array) = to_arrow(t, "cm", CopyPolicy::Never).unwrap();
    assert_eq!(
        array.values().to_data().buffers()[0].as_ptr() as usize,
        data
    );
    assert_eq!(
        field.metadata()[METADATA_KEY],
        r#"{"permutation":[1,0],"shape":[4,3]}"#
    );
    let back = from_arrow(&field, &array).unwrap();
    assert_eq!(back.view().shape(), &[2, 3, 4]);
    assert_eq!(back.view().strides().collect::<Vec<_>>(), [12, 1, 3]);
    assert_eq!(values(&back), want);
}

#[test]
fn other_layouts_are_copied_only_as_the_policy_allows() {
    let _s = serial();
    let before = DROPS.load(Ordering::SeqCst);
    // Every other row of a 4 × 3 matrix: not dense.
    let t = counted_in(12, &[2, 3], Some(&[6, 1]));
    let e = to_arrow(t, "s", CopyPolicy::Never).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Dispatch(dlport_core::error::DispatchError::CopyRequired { .. })
        ),
        "{e}"
    );
    assert_eq!(
        DROPS.load(Ordering::SeqCst),
        before + 1,
        "a refused tensor is released"
    );
    let t = counted_in(12, &[2, 3], Some(&[6, 1]));
    let (field, array) = to_arrow(t, "s", CopyPolicy::IfNeeded).unwrap();
    assert_eq!(
        DROPS.load(Ordering::SeqCst),
        before + 2,
        "the copied tensor is released"
    );
    let back = from_arrow(&field, &array).unwrap();
    assert_eq!(values(&back), [0., 1., 2., 6., 7., 8.]);
    // Always copies even a row-major tensor.
    let t = counted(&[2, 2], None);
    let data = t.view().data() as usize;
    let (_, array) = to_arrow(t, "a", CopyPolicy::Always).unwrap();
    assert_ne!(
        array.values().to_data().buffers()[0].as_ptr() as usize,
        data
    );
}

#[test]
fn dtypes_arrow_cannot_represent_are_refused_by_name() {
    for (dtype, name) in [
        ("bfloat16", "bfloat16"),
        ("complex64", "complex"),
        ("bool", "bool"),
        ("float8_e4m3fn", "8-, 6- and 4-bit floats"),
        ("int4", "sub-byte integers"),
        ("float32x2", "lanes > 1"),
    ] {
        let dt: DataType = dtype.parse().unwrap();
        let bytes = (dt.storage_bits(false) as usize * 2).div_ceil(8);
        let t = ExportBuilder::new(vec![0u8; bytes], dt, &[2])
            .build()
            .unwrap();
        let e = to_arrow(t, "x", CopyPolicy::IfNeeded)
            .unwrap_err()
            .to_string();
        assert!(e.contains(name) && e.contains("arrow"), "{dtype}: {e}");
    }
    let scalar = ExportBuilder::from_vec(vec![1.0f64], &[]).build().unwrap();
    let e = to_arrow(scalar, "x", CopyPolicy::IfNeeded)
        .unwrap_err()
        .to_string();
    assert!(e.contains("ndim = 0"), "{e}");
}

#[test]
fn bad_arrow_columns_are_refused() {
    use arrow_array::{BooleanArray, Int32Array};
    use arrow_schema::{DataType as A, Field};
    use std::collections::HashMap;
    use std::sync::Arc;
    let ext = |meta: &str| {
        HashMap::from([
            (NAME_KEY.to_owned(), EXTENSION_NAME.to_owned()),
            (METADATA_KEY.to_owned(), meta.to_owned()),
        ])
    };
    let item = Arc::new(Field::new("item", A::Int32, true));
    let values = Arc::new(Int32Array::from(vec![Some(1), None, Some(3), Some(4)]));
    let list = FixedSizeListArray::try_new(item.clone(), 2, values, None).unwrap();
    let field =
        |meta: &str| Field::new("t", list.data_type().clone(), false).with_metadata(ext(meta));
    let plain = Field::new("t", list.data_type().clone(), false);
    let cases = [
        (plain, "not arrow.fixed_shape_tensor"),
        (field("{shape"), "ARROW:extension:metadata = \"{shape\""),
        (
            field(r#"{"shape":[3]}"#),
            "FixedSizeList size = 2 (the shape is [3])",
        ),
        (field(r#"{"shape":[-2]}"#), "shape = [-2] is invalid"),
        (
            field(r#"{"shape":[2],"permutation":[1]}"#),
            "permutation = [1] is invalid",
        ),
        (field(r#"{"shape":[2]}"#), "null_count = 1"),
    ];
    for (f, want) in cases {
        let e = from_arrow(&f, &list).unwrap_err().to_string();
        assert!(e.contains(want), "wanted {want:?}: {e}");
    }
    let bits = Arc::new(BooleanArray::from(vec![true, false]));
    let bitem = Arc::new(Field::new("item", A::Boolean, true));
    let blist = FixedSizeListArray::try_new(bitem, 2, bits, None).unwrap();
    let bfield =
        Field::new("t", blist.data_type().clone(), false).with_metadata(ext(r#"{"shape":[2]}"#));
    let e = from_arrow(&bfield, &blist).unwrap_err().to_string();
    assert!(e.contains("Arrow booleans"), "{e}");
}

#[test]
fn ipc_streams_round_trip() {
    let _s = serial();
    let mut stream = Vec::new();
    let t = counted(&[5, 2, 3], None);
    let want = values(&t);
    write_ipc_stream(&mut stream, t, "weights", CopyPolicy::Never).unwrap();
    let got = read_ipc_stream(stream.as_slice()).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].name, "weights");
    assert_eq!(got[0].dim_names, None);
    assert_eq!(got[0].tensor.view().shape(), &[5, 2, 3]);
    assert_eq!(values(&got[0].tensor), want);
    let e = read_ipc_stream(&stream[..stream.len() / 2])
        .unwrap_err()
        .to_string();
    assert!(e.contains("the stream ends after"), "{e}");
}

/// What pyarrow must read, and what it writes for us: see tests/arrow/pyarrow_check.py.
#[test]
#[ignore = "needs pyarrow in .venv: run scripts/arrow-test.sh"]
fn pyarrow_reads_our_streams_and_we_read_its() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let python = std::env::var("DLPORT_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| root.join(".venv/bin/python"));
    let script = root.join("tests/arrow/pyarrow_check.py");
    let dir = std::env::temp_dir().join(format!("dlport-arrow-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Ours: a row-major float32 [4, 2, 3] and a column-major-per-item int64 [2, 3, 4].
    let ours = dir.join("ours.arrows");
    {
        let mut f = std::fs::File::create(&ours).unwrap();
        let t = counted(&[4, 2, 3], None);
        write_ipc_stream(&mut f, t, "f32", CopyPolicy::Never).unwrap();
    }
    let cm = dir.join("cm.arrows");
    {
        let mut f = std::fs::File::create(&cm).unwrap();
        let t = ExportBuilder::from_vec((0..24i64).collect::<Vec<_>>(), &[2, 3, 4])
            .strides(&[12, 1, 3])
            .build()
            .unwrap();
        write_ipc_stream(&mut f, t, "i64", CopyPolicy::Never).unwrap();
    }
    let theirs = dir.join("theirs.arrows");
    let out = std::process::Command::new(&python)
        .arg(&script)
        .arg(&ours)
        .arg(&cm)
        .arg(&theirs)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", python.display()));
    let log =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    println!("{log}");
    assert!(out.status.success(), "pyarrow: {log}");
    // pyarrow wrote: "u16" = arange(60, dtype=uint16).reshape(5, 3, 4), "f64" = its float64 × 0.5.
    let got = read_ipc_stream(std::fs::File::open(&theirs).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let names: Vec<&str> = got.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["u16", "f64"]);
    assert_eq!(got[0].tensor.view().shape(), &[5, 3, 4]);
    assert_eq!(got[0].tensor.view().dtype(), DataType::UINT16);
    assert_eq!(
        got[0].tensor.view().to_vec::<u16>().unwrap(),
        (0..60).collect::<Vec<u16>>()
    );
    assert_eq!(
        got[1].tensor.view().to_vec::<f64>().unwrap(),
        (0..60).map(|i| f64::from(i) * 0.5).collect::<Vec<_>>()
    );
}
