//! The Arrow bridge's malformed-input catalogue (feature `arrow`): malformed IPC streams and
//! malformed `arrow.fixed_shape_tensor` metadata, each run through every Arrow entry point that
//! reads it, each refused with an error that shows the bad value; 10^4 deterministic mutations
//! of valid streams' headers, none of which may panic or allocate more than a bound set by the
//! stream's length; and (ignored unless run by `scripts/arrow-test.sh`) the same streams given
//! to pyarrow, which must refuse every stream the catalogue marks as pyarrow-refused.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::HashMap;
use std::io::Read;
use std::sync::Arc;

use arrow_array::{Array, FixedSizeListArray, Int32Array, RecordBatch, StringArray};
use arrow_schema::{DataType as A, Field, Schema};
use dlport_native::arrow::{
    EXTENSION_NAME, METADATA_KEY, NAME_KEY, from_arrow, from_record_batch, read_ipc_stream,
    tensor_metadata, write_ipc_stream,
};
use dlport_native::dlport_core::{self, CopyPolicy, Error, ExportBuilder};

// ── The largest allocation a call makes on this thread ──

struct Largest;

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(bytes: usize) {
    let _ = ARMED.try_with(|armed| {
        if armed.get() {
            LARGEST.with(|l| l.set(l.get().max(bytes)));
        }
    });
}

// SAFETY: every call is forwarded to the system allocator unchanged; `note` only reads and
// writes two const-initialised thread-locals (no allocation).
unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: forwarded with the caller's pointer, layout and size.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Largest = Largest;

/// `f`'s result and the largest single allocation it made on this thread.
fn largest_allocation<R>(f: impl FnOnce() -> R) -> (R, usize) {
    LARGEST.with(|l| l.set(0));
    ARMED.with(|a| a.set(true));
    let r = f();
    ARMED.with(|a| a.set(false));
    (r, LARGEST.with(Cell::get))
}

/// The allocation limit is process-wide: the test that lowers it holds this for writing, every
/// test whose expected errors assume the default holds it for reading.
static LIMIT: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn default_limit() -> std::sync::RwLockReadGuard<'static, ()> {
    LIMIT.read().unwrap_or_else(|p| p.into_inner())
}

/// What a read may allocate at most for a stream of `len` bytes: a step of 64 KiB, then twice
/// what the stream supplied, and small bookkeeping.
fn allocation_bound(len: usize) -> usize {
    (64 << 10) + 2 * len + (16 << 10)
}

// ── Valid streams ──

/// A float32 [5, 2, 3] tensor written by dlport (one record batch, body 120 bytes).
fn f32_stream() -> Vec<u8> {
    let t = ExportBuilder::from_vec((0..30).map(|i| i as f32).collect::<Vec<_>>(), &[5, 2, 3])
        .build()
        .unwrap();
    let mut s = Vec::new();
    write_ipc_stream(&mut s, t, "x", CopyPolicy::Never).unwrap();
    s
}

/// An int64 [2, 3, 4] tensor whose items are column-major (a `permutation`), written by dlport.
fn permuted_stream() -> Vec<u8> {
    let t = ExportBuilder::from_vec((0..24i64).collect::<Vec<_>>(), &[2, 3, 4])
        .strides(&[12, 1, 3])
        .build()
        .unwrap();
    let mut s = Vec::new();
    write_ipc_stream(&mut s, t, "p", CopyPolicy::Never).unwrap();
    s
}

/// A stream as another producer writes it: a Utf8 column, then a tensor column with
/// `dim_names`, in two record batches (written by arrow-rs).
fn mixed_stream() -> Vec<u8> {
    let item = Arc::new(Field::new("item", A::Int32, false));
    let list = FixedSizeListArray::try_new(
        item,
        4,
        Arc::new(Int32Array::from((0..12).collect::<Vec<_>>())),
        None,
    )
    .unwrap();
    let field = tensor_field(
        "t",
        list.data_type(),
        Some(r#"{"shape":[2,2],"dim_names":["h","w"]}"#),
    );
    let schema = Arc::new(Schema::new(vec![
        Field::new("label", A::Utf8, false),
        field,
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(vec!["a", "bb", "ccc"])),
            Arc::new(list),
        ],
    )
    .unwrap();
    let mut s = Vec::new();
    let mut w = arrow_ipc::writer::StreamWriter::try_new(&mut s, &schema).unwrap();
    w.write(&batch).unwrap();
    w.write(&batch).unwrap();
    w.finish().unwrap();
    drop(w);
    s
}

fn tensor_field(name: &str, t: &A, metadata: Option<&str>) -> Field {
    let mut m = HashMap::from([(NAME_KEY.to_owned(), EXTENSION_NAME.to_owned())]);
    if let Some(text) = metadata {
        m.insert(METADATA_KEY.to_owned(), text.to_owned());
    }
    Field::new(name, t.clone(), false).with_metadata(m)
}

// ── The framing, to patch headers ──

/// One message of a stream: where its length prefix, metadata and body lie.
struct Frame {
    prefix: usize,
    meta: std::ops::Range<usize>,
    body: std::ops::Range<usize>,
}

fn frames(s: &[u8]) -> Vec<Frame> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 8 <= s.len() {
        let len = i32::from_le_bytes(s[at + 4..at + 8].try_into().unwrap());
        if len <= 0 {
            break;
        }
        let meta = at + 8..at + 8 + len as usize;
        let body_len = arrow_ipc::root_as_message(&s[meta.clone()])
            .unwrap()
            .bodyLength() as usize;
        let body = meta.end..meta.end + body_len;
        at = body.end;
        out.push(Frame {
            prefix: meta.start - 8,
            meta,
            body,
        });
    }
    out
}

/// Where in `s` a field lies, from the table's location and vtable entry in `frame`'s metadata.
fn at(frame: &Frame, loc: usize, field_offset: u16) -> usize {
    assert_ne!(field_offset, 0, "the field is written");
    frame.meta.start + loc + usize::from(field_offset)
}

fn message<'a>(s: &'a [u8], f: &Frame) -> arrow_ipc::Message<'a> {
    arrow_ipc::root_as_message(&s[f.meta.clone()]).unwrap()
}

/// The first record batch's frame.
fn batch_frame(s: &[u8]) -> Frame {
    frames(s)
        .into_iter()
        .find(|f| message(s, f).header_type() == arrow_ipc::MessageHeader::RecordBatch)
        .unwrap()
}

fn put_i64(s: &mut [u8], at: usize, v: i64) {
    s[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn put_i32(s: &mut [u8], at: usize, v: i32) {
    s[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// Sets the first record batch's `bodyLength`.
fn set_body_length(s: &mut [u8], v: i64) {
    let f = batch_frame(s);
    let m = message(s, &f);
    let pos = at(
        &f,
        m._tab.loc(),
        m._tab.vtable().get(arrow_ipc::Message::VT_BODYLENGTH),
    );
    put_i64(s, pos, v);
}

/// Sets the first record batch's `length`.
fn set_batch_length(s: &mut [u8], v: i64) {
    let f = batch_frame(s);
    let b = message(s, &f).header_as_record_batch().unwrap();
    let pos = at(
        &f,
        b._tab.loc(),
        b._tab.vtable().get(arrow_ipc::RecordBatch::VT_LENGTH),
    );
    put_i64(s, pos, v);
}

/// Sets word `word` (0: length or offset, 1: null_count or length) of field node `i` (or of
/// buffer `i`) of the first record batch.
fn set_node(s: &mut [u8], i: usize, word: usize, v: i64) {
    let f = batch_frame(s);
    let b = message(s, &f).header_as_record_batch().unwrap();
    let base = b.nodes().unwrap().bytes().as_ptr() as usize - s[f.meta.clone()].as_ptr() as usize;
    put_i64(s, f.meta.start + base + 16 * i + 8 * word, v);
}

fn set_buffer(s: &mut [u8], i: usize, word: usize, v: i64) {
    let f = batch_frame(s);
    let b = message(s, &f).header_as_record_batch().unwrap();
    let base = b.buffers().unwrap().bytes().as_ptr() as usize - s[f.meta.clone()].as_ptr() as usize;
    put_i64(s, f.meta.start + base + 16 * i + 8 * word, v);
}

/// Sets the element count of the first record batch's field-node vector (`nodes`) or buffer
/// vector.
fn set_vector_len(s: &mut [u8], nodes: bool, v: u32) {
    let f = batch_frame(s);
    let b = message(s, &f).header_as_record_batch().unwrap();
    let bytes = if nodes {
        b.nodes().unwrap().bytes()
    } else {
        b.buffers().unwrap().bytes()
    };
    let base = bytes.as_ptr() as usize - s[f.meta.clone()].as_ptr() as usize;
    put_i32(s, f.meta.start + base - 4, v as i32);
}

/// Sets the `listSize` of the schema's column `col` (a FixedSizeList).
fn set_list_size(s: &mut [u8], col: usize, v: i32) {
    let f = frames(s).remove(0);
    let fields = message(s, &f).header_as_schema().unwrap().fields().unwrap();
    let fsl = fields.get(col).type_as_fixed_size_list().unwrap();
    let pos = at(
        &f,
        fsl._tab.loc(),
        fsl._tab.vtable().get(arrow_ipc::FixedSizeList::VT_LISTSIZE),
    );
    put_i32(s, pos, v);
}

/// Sets message `k`'s metadata version.
fn set_version(s: &mut [u8], k: usize, v: i16) {
    let f = frames(s).remove(k);
    let m = message(s, &f);
    let pos = at(
        &f,
        m._tab.loc(),
        m._tab.vtable().get(arrow_ipc::Message::VT_VERSION),
    );
    s[pos..pos + 2].copy_from_slice(&v.to_le_bytes());
}

// ── The catalogue ──

/// Whether pyarrow refuses a case too, or accepts it and why dlport refuses it anyway.
#[derive(Clone, Copy, Debug)]
enum Pyarrow {
    Refuses,
    Accepts(&'static str),
}

/// A malformed stream: its name, how it is made, what dlport's error must contain, and
/// pyarrow's verdict.
struct StreamCase {
    name: &'static str,
    make: fn() -> Vec<u8>,
    want: &'static str,
    pyarrow: Pyarrow,
}

fn with(mut s: Vec<u8>, f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    f(&mut s);
    s
}

const STREAMS: &[StreamCase] = &[
    StreamCase {
        name: "body_length_minus_one",
        make: || with(f32_stream(), |s| set_body_length(s, -1)),
        want: "Message.bodyLength = -1",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "body_length_2_50",
        make: || with(f32_stream(), |s| set_body_length(s, 1 << 50)),
        want: "Message.bodyLength = 1125899906842624 (the stream ends after",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "body_length_2_34",
        make: || with(f32_stream(), |s| set_body_length(s, 1 << 34)),
        want: "Message.bodyLength = 17179869184 (the stream ends after",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "body_length_i64_max",
        make: || with(f32_stream(), |s| set_body_length(s, i64::MAX)),
        want: "9223372036854775807",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "metadata_length_negative",
        make: || with(f32_stream(), |s| put_i32(s, 4, -8)),
        want: "message metadata length = -8",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "metadata_length_i32_max",
        make: || with(f32_stream(), |s| put_i32(s, 4, i32::MAX)),
        want: "message metadata length = 2147483647 (the stream ends after",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "metadata_not_a_flatbuffer",
        make: || {
            with(f32_stream(), |s| {
                let f = frames(s).remove(0);
                s[f.meta.start..f.meta.start + 8].fill(0xff);
            })
        },
        want: "Message (the metadata flatbuffer) =",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "metadata_version_v3",
        make: || with(f32_stream(), |s| set_version(s, 0, 2)),
        want: "Message.version = V3",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "no_schema_first",
        make: || {
            let s = f32_stream();
            let f = frames(&s).remove(0);
            s[f.body.end..].to_vec()
        },
        want: "Message.header (the first message) = RecordBatch",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "empty",
        make: Vec::new,
        want: "stream length = 0",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "cut_in_the_body",
        make: || {
            let s = f32_stream();
            let f = batch_frame(&s);
            s[..f.body.start + 40].to_vec()
        },
        want: "Message.bodyLength = 128 (the stream ends after 40 of those bytes)",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "cut_in_a_length_prefix",
        make: || {
            let s = f32_stream();
            let f = batch_frame(&s);
            s[..f.prefix + 6].to_vec()
        },
        want: "message length prefix = 4 (the stream ends after 2 of those bytes)",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "node_length_negative",
        make: || with(f32_stream(), |s| set_node(s, 0, 0, -1)),
        want: "FieldNode.length = -1",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "node_length_past_the_batch",
        make: || with(f32_stream(), |s| set_node(s, 0, 0, 1 << 62)),
        want: "FieldNode.length (a column's first node) = 4611686018427387904 (the batch has 5 rows)",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "rows_times_list_size_overflows",
        make: || {
            with(f32_stream(), |s| {
                set_node(s, 0, 0, 1 << 62);
                set_batch_length(s, 1 << 62);
            })
        },
        want: "FieldNode.length (a FixedSizeList's values) = 30 (the list holds 4611686018427387904 items of 6)",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "values_node_too_short",
        make: || with(f32_stream(), |s| set_node(s, 1, 0, 29)),
        want: "FieldNode.length (a FixedSizeList's values) = 29 (the list holds 5 items of 6)",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "null_count_past_length",
        make: || with(f32_stream(), |s| set_node(s, 1, 1, 31)),
        want: "FieldNode.null_count = 31",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "nulls_in_a_tensor",
        make: || with(f32_stream(), |s| set_node(s, 1, 1, 2)),
        want: "null_count = 2",
        // pyarrow refuses the empty validity bitmap; dlport refuses the nulls first.
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "buffer_offset_negative",
        make: || with(f32_stream(), |s| set_buffer(s, 2, 0, -8)),
        want: "Buffer.offset = -8",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "buffer_offset_unaligned",
        make: || with(f32_stream(), |s| set_buffer(s, 2, 0, 4)),
        want: "Buffer.offset = 4",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "buffer_past_the_body",
        make: || with(f32_stream(), |s| set_buffer(s, 2, 1, 1 << 50)),
        want: "Buffer offset + length = 0 + 1125899906842624 (the body holds 128 bytes)",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "buffer_length_negative",
        make: || with(f32_stream(), |s| set_buffer(s, 2, 1, -1)),
        want: "Buffer.length = -1",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "values_buffer_too_short",
        make: || with(f32_stream(), |s| set_buffer(s, 2, 1, 64)),
        want: "Buffer.length (a FixedSizeList's values) = 64 (the values need 30 elements of 4 bytes)",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "list_size_negative",
        make: || with(f32_stream(), |s| set_list_size(s, 0, -1)),
        want: "FixedSizeList.listSize = -1",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "list_size_not_the_shape",
        make: || with(f32_stream(), |s| set_list_size(s, 0, 3)),
        want: "FixedSizeList size = 3 (the shape is [2, 3])",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "fewer_nodes_than_the_schema_needs",
        make: || with(f32_stream(), |s| set_vector_len(s, true, 1)),
        want: "RecordBatch.nodes length = 1 (the schema needs 2)",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "fewer_buffers_than_the_schema_needs",
        make: || with(f32_stream(), |s| set_vector_len(s, false, 2)),
        want: "RecordBatch.buffers length = 2 (the schema needs 3)",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "a_second_schema",
        make: || {
            let s = f32_stream();
            let f = frames(&s).remove(0);
            [&s[..f.body.end], &s[..f.body.end], &s[f.body.end..]].concat()
        },
        want: "Message.header = Schema is invalid",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "mixed_stream_label_node_negative",
        make: || with(mixed_stream(), |s| set_node(s, 0, 0, -5)),
        want: "FieldNode.length = -5",
        pyarrow: Pyarrow::Refuses,
    },
    StreamCase {
        name: "mixed_stream_label_offsets_past_the_body",
        make: || with(mixed_stream(), |s| set_buffer(s, 1, 1, 1 << 40)),
        want: "(the body holds",
        pyarrow: Pyarrow::Refuses,
    },
];

/// A `Read` that hands out one byte per call (another path through the framing).
struct Trickle<'a>(&'a [u8]);

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match (self.0.split_first(), buf.first_mut()) {
            (Some((&b, rest)), Some(slot)) => {
                *slot = b;
                self.0 = rest;
                Ok(1)
            }
            _ => Ok(0),
        }
    }
}

fn refusal(r: Result<Vec<dlport_native::arrow::StreamTensor>, Error>) -> String {
    match r {
        Ok(t) => panic!("accepted: {} tensors", t.len()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn every_malformed_stream_is_refused_by_name_with_its_value_and_bounded_allocation() {
    let _limit = default_limit();
    for case in STREAMS {
        let s = (case.make)();
        for (door, read) in [
            (
                "a slice",
                &(|s: &[u8]| read_ipc_stream(s)) as &dyn Fn(&[u8]) -> _,
            ),
            ("a one-byte reader", &|s: &[u8]| read_ipc_stream(Trickle(s))),
        ] {
            let (r, largest) = largest_allocation(|| read(&s));
            let e = refusal(r);
            assert!(
                e.contains(case.want),
                "{} through {door}: wanted {:?} in: {e}",
                case.name,
                case.want
            );
            assert!(
                largest <= allocation_bound(s.len()),
                "{} through {door}: a {largest}-byte allocation for a {}-byte stream",
                case.name,
                s.len()
            );
        }
    }
}

#[test]
fn a_body_above_the_allocation_limit_is_refused_before_it_is_read() {
    let s = with(f32_stream(), |s| set_body_length(s, 1 << 34));
    let _limit = LIMIT.write().unwrap_or_else(|p| p.into_inner());
    let before = dlport_core::set_alloc_limit(1 << 20);
    let (r, largest) = largest_allocation(|| read_ipc_stream(s.as_slice()));
    dlport_core::set_alloc_limit(before);
    let e = r.unwrap_err();
    assert!(
        matches!(
            e,
            Error::Dispatch(dlport_core::error::DispatchError::AllocationLimit { .. })
        ),
        "{e}"
    );
    assert!(e.to_string().contains("needs 17179869184 bytes"), "{e}");
    assert!(largest < 64 << 10, "{largest}");
}

#[test]
fn valid_streams_read_back() {
    let got = read_ipc_stream(f32_stream().as_slice()).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].tensor.view().shape(), &[5, 2, 3]);
    let got = read_ipc_stream(Trickle(&permuted_stream())).unwrap();
    assert_eq!(
        got[0].tensor.view().strides().collect::<Vec<_>>(),
        [12, 1, 3]
    );
    let got = read_ipc_stream(mixed_stream().as_slice()).unwrap();
    assert_eq!(
        got.len(),
        2,
        "one tensor per batch; the Utf8 column skipped"
    );
    for t in &got {
        assert_eq!(t.name, "t");
        assert_eq!(
            t.dim_names.as_deref(),
            Some(&["h".to_owned(), "w".to_owned()][..])
        );
        assert_eq!(t.tensor.view().shape(), &[3, 2, 2]);
        assert_eq!(
            t.tensor.view().to_vec::<i32>().unwrap(),
            (0..12).collect::<Vec<_>>()
        );
    }
}

/// xorshift64*: the mutation loop is the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Values a hostile header holds.
const EXTREMES: [i64; 10] = [
    -1,
    -8,
    0,
    1 << 34,
    1 << 50,
    1 << 62,
    i64::MAX,
    i64::MIN,
    i32::MAX as i64,
    7,
];

#[test]
fn ten_thousand_header_mutations_never_panic_and_allocate_within_bounds() {
    let seeds = [f32_stream(), permuted_stream(), mixed_stream()];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut refused, mut accepted) = (0u32, 0u32);
    for i in 0..10_000 {
        let mut s = seeds[i % seeds.len()].clone();
        let headers: Vec<std::ops::Range<usize>> = frames(&s)
            .iter()
            .flat_map(|f| [f.prefix..f.meta.start, f.meta.clone()])
            .collect();
        for _ in 0..1 + rng.below(4) {
            let h = &headers[rng.below(headers.len())];
            let pos = h.start + rng.below(h.len());
            match rng.below(3) {
                // One byte.
                0 => s[pos] = rng.next() as u8,
                // An extreme i64 or i32 at an aligned position in the header.
                1 => {
                    let pos = pos & !7;
                    let v = EXTREMES[rng.below(EXTREMES.len())];
                    if pos + 8 <= h.end {
                        put_i64(&mut s, pos, v);
                    }
                }
                _ => {
                    let pos = pos & !3;
                    if pos + 4 <= h.end {
                        put_i32(&mut s, pos, EXTREMES[rng.below(EXTREMES.len())] as i32);
                    }
                }
            }
        }
        let (r, largest) = largest_allocation(|| read_ipc_stream(s.as_slice()));
        match r {
            Ok(tensors) => {
                accepted += 1;
                for t in tensors {
                    let v = t.tensor.view();
                    assert!(v.byte_span().len() <= s.len() as u64, "mutation {i}");
                }
            }
            Err(e) => {
                refused += 1;
                let e = e.to_string();
                assert!(!e.contains("panicked"), "mutation {i}: {e}");
            }
        }
        assert!(
            largest <= allocation_bound(s.len()),
            "mutation {i}: a {largest}-byte allocation for a {}-byte stream",
            s.len()
        );
    }
    println!("10,000 header mutations: {refused} refused, {accepted} read");
    assert!(
        refused > 1000 && accepted > 0,
        "{refused} refused, {accepted} read"
    );
}

// ── Malformed metadata, through every door ──

/// A malformed `arrow.fixed_shape_tensor` field metadata (`None`: the metadata key is absent)
/// over an Int32 FixedSizeList[4] of 3 items, and what the error must contain.
struct MetadataCase {
    name: &'static str,
    metadata: Option<&'static str>,
    want: &'static str,
    pyarrow: Pyarrow,
}

const METADATA: &[MetadataCase] = &[
    MetadataCase {
        name: "shape_negative",
        metadata: Some(r#"{"shape":[-2,-3]}"#),
        want: "shape = [-2,-3] is invalid",
        pyarrow: Pyarrow::Refuses,
    },
    MetadataCase {
        name: "shape_float",
        metadata: Some(r#"{"shape":[2.0,2]}"#),
        want: "shape = [2.0,2] is invalid",
        pyarrow: Pyarrow::Refuses,
    },
    MetadataCase {
        name: "shape_not_a_list",
        metadata: Some(r#"{"shape":4}"#),
        want: "shape = 4 is invalid",
        pyarrow: Pyarrow::Refuses,
    },
    MetadataCase {
        name: "shape_product_overflows",
        metadata: Some(r#"{"shape":[4611686018427387904,4]}"#),
        want: "shape = [4611686018427387904, 4]",
        pyarrow: Pyarrow::Refuses,
    },
    MetadataCase {
        name: "shape_not_the_list_size",
        metadata: Some(r#"{"shape":[3]}"#),
        want: "FixedSizeList size = 4 (the shape is [3])",
        pyarrow: Pyarrow::Refuses,
    },
    MetadataCase {
        name: "shape_missing",
        metadata: Some(r#"{"permutation":[0]}"#),
        want: r#"missing key "shape""#,
        pyarrow: Pyarrow::Refuses,
    },
    MetadataCase {
        name: "permutation_negative",
        metadata: Some(r#"{"shape":[2,2],"permutation":[-1,0]}"#),
        want: "permutation = [-1,0] is invalid",
        pyarrow: Pyarrow::Refuses,
    },
    MetadataCase {
        name: "permutation_repeated",
        metadata: Some(r#"{"shape":[2,2],"permutation":[0,0]}"#),
        want: "permutation = [0,0] is invalid",
        pyarrow: Pyarrow::Refuses,
    },
    MetadataCase {
        name: "permutation_short",
        metadata: Some(r#"{"shape":[2,2],"permutation":[0]}"#),
        want: "permutation = [0] is invalid",
        pyarrow: Pyarrow::Refuses,
    },
    MetadataCase {
        name: "dim_names_wrong_length",
        metadata: Some(r#"{"shape":[2,2],"dim_names":["h"]}"#),
        want: r#"dim_names = ["h"] is invalid"#,
        pyarrow: Pyarrow::Refuses,
    },
    MetadataCase {
        name: "dim_names_not_a_list",
        metadata: Some(r#"{"shape":[2,2],"dim_names":"hw"}"#),
        want: r#"dim_names = "hw" is invalid"#,
        pyarrow: Pyarrow::Refuses,
    },
    MetadataCase {
        name: "dim_names_not_strings",
        metadata: Some(r#"{"shape":[2,2],"dim_names":[1,2]}"#),
        want: "dim_names = [1,2] is invalid",
        pyarrow: Pyarrow::Refuses,
    },
    MetadataCase {
        name: "unknown_key",
        metadata: Some(r#"{"shape":[4],"strides":[1]}"#),
        want: r#"ARROW:extension:metadata key = "strides" is invalid"#,
        pyarrow: Pyarrow::Accepts(
            "pyarrow ignores keys the extension does not define; dlport cannot know what such a key changes about the data",
        ),
    },
    MetadataCase {
        name: "key_twice",
        metadata: Some(r#"{"shape":[4],"shape":[2,2]}"#),
        want: r#"key = "shape" is invalid: it must be written once"#,
        pyarrow: Pyarrow::Accepts(
            "pyarrow's JSON reader keeps one of the two; which shape is meant is ambiguous",
        ),
    },
    MetadataCase {
        name: "not_json",
        metadata: Some("{shape"),
        want: r#"ARROW:extension:metadata = "{shape""#,
        pyarrow: Pyarrow::Refuses,
    },
    MetadataCase {
        name: "metadata_key_missing",
        metadata: None,
        want: "missing key ARROW:extension:metadata",
        pyarrow: Pyarrow::Refuses,
    },
    MetadataCase {
        name: "too_many_axes",
        metadata: Some(
            r#"{"shape":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,4]}"#,
        ),
        want: "ndim = 65",
        pyarrow: Pyarrow::Refuses,
    },
];

/// The field and a 3-item Int32 FixedSizeList[4] for a metadata case.
fn metadata_column(metadata: Option<&str>) -> (Field, FixedSizeListArray) {
    let item = Arc::new(Field::new("item", A::Int32, false));
    let list = FixedSizeListArray::try_new(
        item,
        4,
        Arc::new(Int32Array::from((0..12).collect::<Vec<_>>())),
        None,
    )
    .unwrap();
    (tensor_field("t", list.data_type(), metadata), list)
}

/// The metadata case's column as an IPC stream (arrow-rs writes any metadata).
fn metadata_stream(metadata: Option<&str>) -> Vec<u8> {
    let (field, list) = metadata_column(metadata);
    let schema = Arc::new(Schema::new(vec![field]));
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(list)]).unwrap();
    let mut s = Vec::new();
    let mut w = arrow_ipc::writer::StreamWriter::try_new(&mut s, &schema).unwrap();
    w.write(&batch).unwrap();
    w.finish().unwrap();
    drop(w);
    s
}

#[test]
fn every_malformed_metadata_is_refused_by_every_door_with_its_value() {
    let _limit = default_limit();
    for case in METADATA {
        let (field, list) = metadata_column(case.metadata);
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![field.clone()])),
            vec![Arc::new(list.clone())],
        )
        .unwrap();
        let stream = metadata_stream(case.metadata);
        let doors: [(&str, Result<(), Error>); 4] = [
            ("from_arrow", from_arrow(&field, &list).map(drop)),
            (
                "from_record_batch",
                from_record_batch(&batch, "t").map(drop),
            ),
            (
                "read_ipc_stream",
                read_ipc_stream(stream.as_slice()).map(drop),
            ),
            (
                "tensor_metadata",
                tensor_metadata(&field).map(drop).and_then(|()| {
                    // The list size is checked against the shape where the array is known.
                    from_arrow(&field, &list).map(drop)
                }),
            ),
        ];
        for (door, r) in doors {
            let e = r.expect_err(case.name).to_string();
            assert!(
                e.contains(case.want),
                "{} through {door}: wanted {:?} in: {e}",
                case.name,
                case.want
            );
        }
    }
}

#[test]
fn dim_names_are_checked_and_returned() {
    let (field, list) = metadata_column(Some(r#"{"shape":[2,2],"dim_names":["h","w"]}"#));
    let meta = tensor_metadata(&field).unwrap();
    assert_eq!(meta.dim_names, Some(vec!["h".to_owned(), "w".to_owned()]));
    assert_eq!(
        from_arrow(&field, &list).unwrap().view().shape(),
        &[3, 2, 2]
    );
    let got = read_ipc_stream(
        metadata_stream(Some(r#"{"shape":[2,2],"dim_names":["h","w"]}"#)).as_slice(),
    )
    .unwrap();
    assert_eq!(got[0].dim_names, meta.dim_names);
}

// ── pyarrow against the same streams ──

/// Writes every catalogue stream to a folder, asks pyarrow to read each, and checks that
/// pyarrow refuses every one the catalogue marks `Refuses` (and reports the ones it accepts).
#[test]
#[ignore = "needs pyarrow in .venv: run scripts/arrow-test.sh"]
fn pyarrow_refuses_what_the_catalogue_says_it_refuses() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let python = std::env::var("DLPORT_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| root.join(".venv/bin/python"));
    let dir = std::env::temp_dir().join(format!("dlport-arrow-malformed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut expected = Vec::new();
    for c in STREAMS {
        std::fs::write(dir.join(format!("{}.arrows", c.name)), (c.make)()).unwrap();
        expected.push((c.name, c.pyarrow));
    }
    for c in METADATA {
        std::fs::write(
            dir.join(format!("{}.arrows", c.name)),
            metadata_stream(c.metadata),
        )
        .unwrap();
        expected.push((c.name, c.pyarrow));
    }
    let out = std::process::Command::new(&python)
        .arg(root.join("tests/arrow/pyarrow_check.py"))
        .arg("refusals")
        .arg(&dir)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", python.display()));
    let log = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "pyarrow: {log}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
    let verdicts: HashMap<&str, &str> = log.lines().filter_map(|l| l.split_once(' ')).collect();
    let mut wrong = Vec::new();
    for (name, want) in expected {
        let got = verdicts.get(name).copied().unwrap_or("missing");
        let refused = got.starts_with("refused");
        match want {
            Pyarrow::Refuses => println!("{name}: both refuse (pyarrow: {got})"),
            Pyarrow::Accepts(why) => println!("{name}: pyarrow {got}; dlport refuses: {why}"),
        }
        match want {
            Pyarrow::Refuses if !refused => wrong.push(format!("{name}: pyarrow {got}")),
            Pyarrow::Accepts(_) if refused => wrong.push(format!("{name}: pyarrow {got}")),
            _ => {}
        }
    }
    assert!(
        wrong.is_empty(),
        "pyarrow disagrees with the catalogue: {wrong:#?}"
    );
}

/// Writes the valid streams and every catalogue stream into the `arrow_ipc` fuzz target's
/// corpus (`fuzz/corpus/arrow_ipc/seed-*.arrows`): run by hand when the catalogue grows (see
/// FUZZING.md); pyarrow's seeds come from `tests/arrow/pyarrow_check.py seeds`.
#[test]
#[ignore = "writes the fuzz corpus's seeds: run by hand (FUZZING.md)"]
fn write_fuzz_seeds() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/arrow_ipc");
    std::fs::create_dir_all(&dir).unwrap();
    let mut seeds = vec![
        ("f32", f32_stream()),
        ("permuted", permuted_stream()),
        ("mixed", mixed_stream()),
    ];
    seeds.extend(STREAMS.iter().map(|c| (c.name, (c.make)())));
    seeds.extend(
        METADATA
            .iter()
            .map(|c| (c.name, metadata_stream(c.metadata))),
    );
    for (name, bytes) in seeds {
        std::fs::write(dir.join(format!("seed-{name}.arrows")), bytes).unwrap();
    }
}

/// Streams pyarrow 26 wrote (`tests/arrow/streams/`, from `pyarrow_check.py seeds`: dictionary
/// batches, strings with nulls, lists, structs beside the tensors; a `dim_names` and
/// `permutation` column; an LZ4-compressed table) read back, or are refused by name: the checks
/// accept what a real producer writes.
#[test]
fn streams_pyarrow_wrote_read_back() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/arrow/streams");
    let read = |name: &str| {
        let bytes = std::fs::read(dir.join(format!("pyarrow-{name}.arrows"))).unwrap();
        read_ipc_stream(bytes.as_slice()).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    for name in ["f32", "f16", "u8", "i64"] {
        let got = read(name);
        let rows: i64 = got.iter().map(|t| t.tensor.view().shape()[0]).sum();
        assert_eq!(rows, 2, "{name}");
        assert_eq!(got[0].tensor.view().shape()[1..], [3, 4], "{name}");
    }
    let named = read("named");
    assert_eq!(
        named[0].dim_names,
        Some(vec!["h".to_owned(), "w".to_owned()])
    );
    assert_eq!(named[0].tensor.view().shape(), &[2, 4, 3]);
    assert_eq!(
        named[0].tensor.view().strides().collect::<Vec<_>>(),
        [12, 1, 4]
    );
    let mixed = read("mixed");
    assert_eq!(mixed.len(), 2, "3 rows in batches of 2: two tensors");
    assert!(mixed.iter().all(|t| t.name == "t"));
    // A compressed body is refused by name (this build carries no codec).
    let lz4 = std::fs::read(dir.join("pyarrow-lz4.arrows")).unwrap();
    let e = read_ipc_stream(lz4.as_slice()).unwrap_err().to_string();
    assert!(e.contains("compressed record batches"), "{e}");
}
