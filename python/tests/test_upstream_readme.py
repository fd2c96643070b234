"""python/README.md's "Errors dlport gets past" agrees with the upstream suite (issue #57): the
section is what scripts/upstream_report.py renders from tests/upstream/last-run.json, the last
run covers both stacks and every case in tests/upstream/cases.py, and each case is a test."""

import ast
import importlib.util
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


report = load("upstream_report", "scripts/upstream_report.py")
cases = load("upstream_cases", "tests/upstream/cases.py")


def last_run():
    with open(os.path.join(ROOT, "tests", "upstream", "last-run.json"), encoding="utf-8") as f:
        return json.load(f)


def test_readme_section_is_the_last_run_rendered():
    with open(report.README, encoding="utf-8") as f:
        _, have, _ = report.split(f.read())
    assert have == report.section(last_run()), "run: python3 scripts/upstream_report.py readme tests/upstream/last-run.json --write"


def test_last_run_covers_every_case_on_both_stacks():
    run = last_run()
    assert len(run["stacks"]) == 2
    names = {c["test"] for c in cases.CASES}
    for stack in run["stacks"]:
        assert set(stack["cases"]) == names, stack["stack"]
    passed = sum(s["cases"][n]["outcome"] == "passed" for s in run["stacks"] for n in names)
    assert not any(s["cases"][n]["outcome"] == "failed" for s in run["stacks"] for n in names)
    assert passed >= 12


def test_every_case_is_a_test():
    defined = set()
    folder = os.path.join(ROOT, "tests", "upstream")
    for name in os.listdir(folder):
        if name.startswith("test_") and name.endswith(".py"):
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                tree = ast.parse(f.read())
            defined |= {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}
    assert defined == {c["test"] for c in cases.CASES}


def test_a_changed_row_is_caught():
    run = last_run()
    run["stacks"][0]["cases"][cases.CASES[0]["test"]]["outcome"] = "failed"
    with open(report.README, encoding="utf-8") as f:
        _, have, _ = report.split(f.read())
    assert have != report.section(run)
