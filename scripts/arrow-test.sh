#!/usr/bin/env bash
# pyarrow against dlport's Arrow IPC streams: installs pyarrow (tests/arrow/requirements.txt)
# into .venv once (a stamp, as scripts/python-env.sh keeps), then runs the `arrow` feature's
# tests including the pyarrow round trip (ignored in plain `cargo test`): pyarrow reads the
# streams dlport writes as fixed_shape_tensor columns with equal values, and dlport reads the
# ones pyarrow writes; and the Arrow malformed-input catalogue (native/tests/arrow_malformed.rs),
# whose streams pyarrow must refuse wherever the catalogue says it does.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/python-env.sh
req=tests/arrow/requirements.txt
stamp=.venv/.arrow-requirements.sha256
want=$(sha256sum "$req" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || ! .venv/bin/python -c 'import pyarrow' 2>/dev/null; then
  echo "[arrow] installing $req into .venv (pyarrow, about 40 MB; under a minute)"
  .venv/bin/python -m pip install --quiet -r "$req"
  echo "$want" > "$stamp"
fi
echo "[arrow] pyarrow $(.venv/bin/python -c 'import pyarrow; print(pyarrow.__version__)') in .venv"
DLPORT_PYTHON="$PWD/.venv/bin/python" \
  cargo test -p dlport-native --features arrow --test arrow --test arrow_malformed --locked -- \
  --include-ignored --skip write_fuzz_seeds --nocapture
