"""The upstream suite's record: each case says what the framework alone did and what dlport's call
did; with ``DLPORT_UPSTREAM_RESULTS`` set, the session writes them there as JSON
(``scripts/upstream-test.sh`` merges the stacks' files and prints them)."""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
from typing import Any, Callable, Dict, Optional

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from cases import BY_TEST  # noqa: E402

_records: Dict[str, Dict[str, str]] = {}


def version(module: str) -> Optional[str]:
    """The version of an importable module, or None."""
    try:
        return str(importlib.import_module(module).__version__)
    except ImportError:
        return None


def stack() -> str:
    """This environment: the Python and the frameworks the cases use."""
    parts = ["CPython %d.%d" % sys.version_info[:2]]
    for name in ("jax", "numpy", "torch"):
        v = version(name)
        if v:
            parts.append(f"{name} {v}")
    return ", ".join(parts)


class Case:
    """One case's record: ``framework`` (the failure confirmed, or fixed upstream) and ``dlport``
    (what dlport's call did)."""

    def __init__(self, test: str) -> None:
        self.meta = BY_TEST[test]
        self.record = _records.setdefault(test, {"framework": "not run", "dlport": "not run"})

    def framework_fails(
        self, call: Callable[[], Any], pattern: str, *, package: str, kind: type = Exception
    ) -> bool:
        """Runs the framework alone: True when it still fails with a message matching
        ``pattern`` (recorded as confirmed, quoting it); when it succeeds, records "fixed
        upstream in PACKAGE VERSION" and returns False. Any other failure fails the case (the
        framework's error changed: the case needs updating)."""
        try:
            call()
        except kind as e:
            # Addresses vary from run to run: the record keeps the rest.
            text = re.sub(r"0x[0-9a-fA-F]+", "0x...", f"{type(e).__name__}: {e}".splitlines()[0])
            assert re.search(pattern, text), f"the framework's error changed: {text!r} (expected /{pattern}/)"
            self.record["framework"] = f"failure confirmed: {text[:160]}"
            return True
        self.record["framework"] = f"fixed upstream in {package} {version(package)}"
        return False

    def framework_note(self, text: str) -> None:
        """A framework outcome that is no exception (case 13: a capsule without READ_ONLY)."""
        self.record["framework"] = text

    def dlport(self, text: str) -> None:
        """What dlport's call did (checked by the test before it says so)."""
        self.record["dlport"] = text


@pytest.fixture
def case(request: pytest.FixtureRequest) -> Case:
    return Case(request.node.name)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Any:
    outcome = yield
    report = outcome.get_result()
    if item.name not in BY_TEST:
        return
    record = _records.setdefault(item.name, {"framework": "not run", "dlport": "not run"})
    if report.when == "call" or (report.when == "setup" and not report.passed):
        if report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            record["outcome"] = "skipped"
            record["reason"] = reason.removeprefix("Skipped: ")
        else:
            record["outcome"] = report.outcome


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    path = os.environ.get("DLPORT_UPSTREAM_RESULTS")
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"stack": stack(), "cases": _records}, f, indent=1, sort_keys=True)
            f.write("\n")
