#!/usr/bin/env bash
# The one script to run on the GPU machine (H100): install, the full test suite on the GPU, the
# benchmark, `baracuda info`, and a short summary printed last.
#
#   bash bench/run_gpu.sh            # writes everything under $OUT (default ./bench-out)
#
# Time: the device tool stops a command at 600 s, so the whole script aims at ~540 s.  The tests get at
# most TEST_BUDGET s (default 270); the benchmark gets what is left minus a margin (--time-budget stops
# starting new workloads, --max-seconds bounds each workload), with a hard `timeout` behind it.  The
# benchmark rewrites bench.json after every workload, so even a killed run leaves its rows.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/bench-out}
mkdir -p "$OUT"
T0=$(date +%s)
TOTAL=${TOTAL_BUDGET:-540}
TEST_BUDGET=${TEST_BUDGET:-270}
PY=${PYTHON:-python}
unset TRITON_INTERPRET
elapsed() { echo $(( $(date +%s) - T0 )); }

echo "== install ($(elapsed) s)"
if ! $PY -m pip install --no-deps --no-build-isolation -e . > "$OUT/pip.txt" 2>&1; then
    echo "pip install failed (see pip.txt); running from src/ through PYTHONPATH"
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
BC="$PY -m baracuda.cli"     # same as the `baracuda` script, without depending on the install

echo "== tests ($(elapsed) s), at most ${TEST_BUDGET} s"
XDIST=""
if $PY -c "import xdist" 2>/dev/null; then XDIST="-n 8"; fi
# SIGINT first: pytest then stops cleanly, prints its summary and still writes the junit xml.
# PYTEST_FAIL_FLAGS="--maxfail=30" shows more than the first failure in one (expensive) GPU run.
timeout -s INT -k 20 "$TEST_BUDGET" $PY -m pytest tests -q ${PYTEST_FAIL_FLAGS:--x} $XDIST -p no:cacheprovider \
    -p no:warnings -rfE --junitxml="$OUT/junit.xml" > "$OUT/tests.txt" 2>&1
TEST_RC=$?

BENCH_BUDGET=$(( TOTAL - $(elapsed) - 60 ))
if [ "$BENCH_BUDGET" -lt 60 ]; then BENCH_BUDGET=60; fi
echo "== bench ($(elapsed) s), budget ${BENCH_BUDGET} s"
timeout -k 10 $(( BENCH_BUDGET + 45 )) $BC bench --json "$OUT/bench.json" --plot "$OUT/bench.png" \
    --time-budget "$BENCH_BUDGET" --max-seconds 6 > "$OUT/bench.txt" 2> "$OUT/bench.err"
BENCH_RC=$?

echo "== info ($(elapsed) s)"
timeout 60 $BC info > "$OUT/info.txt" 2>&1
$BC ops --format json > "$OUT/coverage.json" 2> /dev/null

echo
echo "================================ summary ================================"
cat "$OUT/info.txt" | head -20
echo "-- tests: exit ${TEST_RC} $( [ $TEST_RC -eq 124 ] && echo '(TIMED OUT)' )"
grep -E "^(FAILED|ERROR) " "$OUT/tests.txt" | head -5
grep -E "[0-9]+ (passed|failed|error)|Interrupted|no tests ran" "$OUT/tests.txt" | tail -n 2
echo "-- bench: exit ${BENCH_RC} $( [ $BENCH_RC -eq 124 ] && echo '(TIMED OUT: partial JSON)' )"
if [ -f "$OUT/bench.json" ]; then
    $PY -m baracuda.bench.report "$OUT/bench.json"
else
    tail -n 20 "$OUT/bench.err"
fi
echo "files in $OUT: tests.txt junit.xml bench.txt bench.json bench.png info.txt coverage.json; total $(elapsed) s"
