"""pyarrow against dlport's Arrow IPC streams (run by native/tests/arrow.rs, through
scripts/arrow-test.sh).

    pyarrow_check.py OURS CM THEIRS

OURS and CM are streams dlport wrote: OURS holds "f32", a float32 [4, 2, 3] tensor (0, 1, 2, …);
CM holds "i64", an int64 [2, 3, 4] tensor whose 3 x 4 items are column-major in memory (dlport
views it without a copy and writes a `permutation`). Both must read back with `pa.ipc` as
`fixed_shape_tensor` columns equal to the NumPy arrays below. Then THEIRS is written by pyarrow:
"u16" = arange(60, uint16).reshape(5, 3, 4) and "f64" = the same as float64 x 0.5, for dlport to
read back.
"""
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


if __name__ == "__main__":
    main(*sys.argv[1:4])
