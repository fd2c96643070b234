#!/usr/bin/env bash
# mypy --strict over the Python code users copy: python/examples/*.py and every ```python block
# of python/README.md (each block written to its own file), against the installed package's
# stubs (python/dlport/__init__.pyi). Needs .venv (scripts/python-env.sh) with dlport installed.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
.venv/bin/python - python/README.md "$dir" <<'PY'
import pathlib, re, sys
text = pathlib.Path(sys.argv[1]).read_text()
blocks = re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)
for i, block in enumerate(blocks):
    pathlib.Path(sys.argv[2], f"readme_block_{i}.py").write_text(block)
print(f"[python] mypy: {len(blocks)} code block(s) of python/README.md")
PY
cd "$dir" && "$OLDPWD/.venv/bin/python" -m mypy --strict --no-incremental --python-version 3.12 \
  ./*.py "$OLDPWD"/python/examples/*.py
