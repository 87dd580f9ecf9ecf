# Sourced by the device scripts (bench/session4_*.sh): from the repository root, the carried wheels (.whl/: the
# NVIDIA frontends and nvmath-python, Liger) installed with --no-deps, src on the path, the interpreter off, the
# output directory $1 made as $out, and f() filtering the device's library noise from a log.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${1:?output directory}; mkdir -p "$out"
python -m pip install --no-deps -q .whl/*.whl 2>&1 | tail -1
export PYTHONPATH="$PWD/src"; unset TRITON_INTERPRET
f() { grep -v "leaked\|nanobind\|See https\|skipped rem\|^ - \|^\[" "$@"; }
