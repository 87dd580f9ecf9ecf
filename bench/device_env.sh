# Sourced by the device scripts (bench/session4_*.sh): from the repository root, the carried wheels (.whl/: the
# NVIDIA frontends and nvmath-python, Liger) installed with --no-deps, src on the path, the interpreter off, the
# output directory $1 made as $out (its gpu.txt: the device), f() filtering the device's library noise from a log, and
# ab() running a command on two trees alternately.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${1:?output directory}; mkdir -p "$out"
python -m pip install --no-deps -q .whl/*.whl 2>&1 | tail -1
export PYTHONPATH="$PWD/src"; unset TRITON_INTERPRET
f() { grep -v "leaked\|nanobind\|See https\|skipped rem\|^ - \|^\[" "$@"; }
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > "$out/gpu.txt" 2>&1; cat "$out/gpu.txt"
# ab 'CMD': CMD twice for each tree, alternating processes -- session 17's (ab_old/src, `git archive REV src` carried
# for the A/B), then this one (src, or $AB_NEW: a snapshot of it); CMD reads $tree (old / new) and $rep (1 / 2)
ab() { local src; for rep in 1 2; do for tree in old new; do
    src=${AB_NEW:-$PWD/src}; [ "$tree" = old ] && src=$PWD/ab_old/src
    PYTHONPATH=$src eval "$1"
done; done; }
