"""dlport.jax against the real XLA CPU plugin behind a table answering "xpu" (a platform JAX's
own DLPack refuses): each JAX configuration in a process of its own (JAX's backends are
process-global), its cases in python/tests/jax_interpose/child.py. Skipped, with the reason,
without DLPORT_PJRT_PLUGIN (scripts/pjrt-test.sh sets it) or JAX."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pjrt_plugin import needs_plugin, run_readme_block

CHILD = Path(__file__).parent / "jax_interpose" / "child.py"
pytestmark = [
    needs_plugin,
    pytest.mark.skipif(sys.version_info < (3, 12), reason="JAX 0.12 needs Python 3.12"),
]
pytest.importorskip("jax", reason="JAX is not installed")


def run(setup, *cases):
    p = subprocess.run(
        [sys.executable, str(CHILD), setup, *cases],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "JAX_PLATFORMS": ""},
    )
    passed = [line.split()[1] for line in p.stdout.splitlines() if line.startswith("PASS ")]
    assert p.returncode == 0 and passed == list(cases), (
        f"exit {p.returncode}, passed {passed}\n{p.stdout}\n{p.stderr[-4000:]}"
    )
    return p.stdout


def test_jax_own_dlpack_refuses_the_stand_in():
    run("registered", "jax_refuses")


def test_both_ways_deletes_donation_threads_round_trips_dtypes():
    out = run(
        "installed",
        "jax_refuses",
        "export_view",
        "export_protocol",
        "import_view",
        "delete_while_exported",
        "donation_while_exported",
        "threads_release",
        "round_trips",
        "dtypes",
        "refuse_unknown_array",
        "copy_when_asked",
        "borrowed_client",
    )
    print(out)


def test_the_platform_table_labels_the_device_when_install_is_not_told():
    run("labelled", "platform_device_label")


def test_a_plugin_lacking_what_a_view_needs_is_copied_or_refused_by_name():
    run("stubbed", "stubbed_plugin")


@pytest.mark.parametrize(
    "case",
    [
        "refuse_unregistered",
        "refuse_backend_exists",
        "refuse_missing_surface",
        "refuse_custom_factory",
    ],
)
def test_install_refusals(case):
    run("registered", case)


def test_import_dlport_installs_nothing():
    run("bare", "import_installs_nothing")


def test_readme_story_runs_as_written():
    """python/README.md's dlport.jax block, run as written in a process of its own (the
    stand-in plugin found as the installed package ``xla_cpu_pjrt``), prints what the README
    shows after it."""
    run_readme_block("## JAX arrays on any PJRT plugin", {"JAX_PLATFORMS": ""})
