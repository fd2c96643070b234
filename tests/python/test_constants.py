"""The binding's numbers come from the generated header (dlport_ctypes.header_constants), and
they are the ones the library really returns."""

import pytest

import dlport_ctypes as dl


def test_header_names_the_statuses_enums_and_every_error_code():
    c = dl.C
    assert (c["DLPORT_OK"], c["DLPORT_PANIC"], c["DLPORT_INVALID_ARGUMENT"]) == (0, -1, -2)
    assert dl.COPY == {False: 0, None: 1, True: 2}
    assert dl.LAYOUT == {"any": 0, "dense": 1, "row_major": 2}
    codes = sorted(dl.ERROR_NAMES)
    assert codes == list(range(1, len(codes) + 1)) and len(codes) >= 39
    assert c["kDLCPU"] == 1 and c["kDLFloat"] == 2 and c["DLPACK_FLAG_BITMASK_READ_ONLY"] == 1


def test_a_real_error_carries_the_code_its_name_says():
    with pytest.raises(dl.DlportError) as e:
        dl.describe_managed(None, True)
    assert e.value.code == dl.C["DLPORT_ERR_NULL_MANAGED_TENSOR"]
    assert dl.ERROR_NAMES[e.value.code] == "DLPORT_ERR_NULL_MANAGED_TENSOR"


def test_version_is_the_crates():
    import re

    cargo = (dl.ROOT / "Cargo.toml").read_text()
    version = re.search(r'^version = "([^"]+)"', cargo, re.M).group(1)
    assert dl.lib.dlport_version().decode() == version
