"""docs/pjrt-matrix.md agrees with the PJRT plugin builds' last run (issue #54 item 4): the doc is
what scripts/pjrt_matrix.py renders from tests/pjrt/last-run.json, the last run covers every
build scripts/pjrt-test.sh runs, and the matrix keeps a report's verdicts, never its reasons."""

import importlib.util
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location("pjrt_matrix", os.path.join(ROOT, "scripts", "pjrt_matrix.py"))
matrix = importlib.util.module_from_spec(spec)
spec.loader.exec_module(matrix)


def last_run():
    with open(os.path.join(ROOT, "tests", "pjrt", "last-run.json"), encoding="utf-8") as f:
        return json.load(f)


def test_the_doc_is_the_last_run_rendered():
    with open(matrix.DOC, encoding="utf-8") as f:
        have = f.read()
    assert have == matrix.render(last_run()), (
        "docs/pjrt-matrix.md is stale: run scripts/pjrt-test.sh (or python3 scripts/pjrt_matrix.py "
        "docs tests/pjrt/last-run.json --write) and commit both")


def test_the_last_run_covers_every_build_of_the_test_command():
    builds = matrix.builds()
    assert len(builds) >= 3, builds
    assert [b["label"] for b in last_run()["builds"]] == builds
    for b in last_run()["builds"]:
        keys = [k for k, _ in b["lines"]]
        for want in ("PJRT API", "struct_size", "primitive PJRT_Client_CreateViewOfDeviceBuffer",
                     "dtype F32", "import host, 64-byte aligned, writable", "export PJRT buffer to DLPack"):
            assert want in keys, (b["label"], want)


def test_a_report_keeps_verdicts_not_reasons_or_paths():
    text = ("plugin: /home/me/x.so\n"
            "PJRT API: 0.81\n"
            "primitive PJRT_Buffer_UnsafePointer: not implemented — stubbed: UNIMPLEMENTED at 0x1234\n"
            "import host, READ_ONLY: one copy — the tensor is READ_ONLY\n")
    assert matrix.parse(text) == [
        ("PJRT API", "0.81"),
        ("primitive PJRT_Buffer_UnsafePointer", "not implemented"),
        ("import host, READ_ONLY", "one copy"),
    ]
    run = {"builds": [{"label": "a 1", "lines": [["PJRT API", "0.81"], ["extension 4", "Layouts"]]},
                      {"label": "b 2", "lines": [["PJRT API", "0.115"], ["extension 24", "unknown"],
                                                 ["extension 4", "Layouts"]]}]}
    doc = matrix.render(run)
    assert "| extension 24 | (none) | unknown |" in doc
    # The rows of a section stay together, whichever build lists a key first.
    assert doc.index("| extension 4 |") < doc.index("| extension 24 |")
