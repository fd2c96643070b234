"""pyarrow against dlport's Arrow IPC streams (run by native/tests/arrow.rs and
native/tests/arrow_malformed.rs, through scripts/arrow-test.sh).

    pyarrow_check.py OURS CM THEIRS
    pyarrow_check.py refusals DIR

In the second form, pyarrow reads every DIR/NAME.arrows (the malformed-stream catalogue of
native/tests/arrow_malformed.rs) in full, each tensor column as NumPy, and prints one line per
stream: "NAME read" or "NAME refused: <pyarrow's error>".

OURS and CM are streams dlport wrote: OURS holds "f32", a float32 [4, 2, 3] tensor (0, 1, 2, …);
CM holds "i64", an int64 [2, 3, 4] tensor whose 3 x 4 items are column-major in memory (dlport
views it without a copy and writes a `permutation`). Both must read back with `pa.ipc` as
`fixed_shape_tensor` columns equal to the NumPy arrays below. Then THEIRS is written by pyarrow:
"u16" = arange(60, uint16).reshape(5, 3, 4) and "f64" = the same as float64 x 0.5, for dlport to
read back.
"""
import pathlib
import sys

import numpy as np
import pyarrow as pa


def read_one(path, name):
    with pa.ipc.open_stream(path) as reader:
        table = reader.read_all()
    col = table.column(name)
    assert isinstance(col.type, pa.FixedShapeTensorType), f"{name}: {col.type!r}"
    arr = col.combine_chunks()
    return col.type, arr.to_numpy_ndarray()


def main(ours, cm, theirs):
    t, a = read_one(ours, "f32")
    want = np.arange(24, dtype=np.float32).reshape(4, 2, 3)
    assert t.shape == [2, 3] and t.value_type == pa.float32(), t
    assert a.dtype == np.float32 and a.shape == (4, 2, 3), (a.dtype, a.shape)
    np.testing.assert_array_equal(a, want)
    print(f"[pyarrow] read f32 {a.shape} from dlport: equal; type {t}")

    t, a = read_one(cm, "i64")
    logical = np.arange(24, dtype=np.int64).reshape(2, 4, 3).transpose(0, 2, 1)
    assert t.permutation == [1, 0], t.permutation
    assert a.shape == (2, 3, 4), a.shape
    np.testing.assert_array_equal(a, logical)
    print(f"[pyarrow] read i64 {a.shape} (permutation {t.permutation}) from dlport: equal")

    u16 = np.arange(60, dtype=np.uint16).reshape(5, 3, 4)
    f64 = u16.astype(np.float64) * 0.5
    cols = [pa.FixedShapeTensorArray.from_numpy_ndarray(x) for x in (u16, f64)]
    table = pa.table(cols, names=["u16", "f64"])
    with pa.ipc.new_stream(theirs, table.schema) as writer:
        writer.write_table(table)
    print(f"[pyarrow {pa.__version__}] wrote u16 and f64 (5, 3, 4) for dlport")


def refusals(folder):
    for path in sorted(pathlib.Path(folder).glob("*.arrows")):
        try:
            with pa.ipc.open_stream(pa.BufferReader(path.read_bytes())) as reader:
                table = reader.read_all()
            table.validate(full=True)
            for col in table.columns:
                if isinstance(col.type, pa.FixedShapeTensorType):
                    col.combine_chunks().to_numpy_ndarray()
            print(f"{path.stem} read")
        except Exception as e:  # every refusal, whatever its class, is what is reported
            line = f"{type(e).__name__}: {e}".replace("\n", " ")[:200]
            print(f"{path.stem} refused: {line}")


def seeds(folder):
    """Streams pyarrow writes, as seeds of the arrow_ipc fuzz target (FUZZING.md)."""
    out = pathlib.Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    t = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    tensors = {
        "f32": pa.FixedShapeTensorArray.from_numpy_ndarray(t),
        "f16": pa.FixedShapeTensorArray.from_numpy_ndarray(t.astype(np.float16)),
        "u8": pa.FixedShapeTensorArray.from_numpy_ndarray(t.astype(np.uint8)),
        "i64": pa.FixedShapeTensorArray.from_numpy_ndarray(t.astype(np.int64)),
    }
    named = pa.fixed_shape_tensor(pa.int32(), [3, 4], dim_names=["h", "w"], permutation=[1, 0])
    storage = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(24, dtype=np.int32)), 12)
    tensors["named"] = pa.ExtensionArray.from_storage(named, storage)
    for name, col in tensors.items():
        write(out / f"seed-pyarrow-{name}.arrows", pa.table([col], names=[name]))
    others = pa.table(
        {
            "s": pa.array(["a", None, "ccc"]),
            "d": pa.array(["x", "y", "x"]).dictionary_encode(),
            "l": pa.array([[1], [], [2, 3]]),
            "st": pa.array([{"a": 1}, {"a": 2}, None]),
            "t": pa.FixedShapeTensorArray.from_numpy_ndarray(t[:1].repeat(3, axis=0)),
        }
    )
    write(out / "seed-pyarrow-mixed.arrows", others)
    lz4 = pa.ipc.IpcWriteOptions(compression="lz4")
    with pa.ipc.new_stream(str(out / "seed-pyarrow-lz4.arrows"), others.schema, options=lz4) as w:
        w.write_table(others)


def write(path, table):
    with pa.ipc.new_stream(str(path), table.schema) as writer:
        writer.write_table(table, max_chunksize=2)


if __name__ == "__main__":
    if sys.argv[1] == "refusals":
        refusals(sys.argv[2])
    elif sys.argv[1] == "seeds":
        seeds(sys.argv[2])
    else:
        main(*sys.argv[1:4])
