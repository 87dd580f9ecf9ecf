#!/usr/bin/env bash
# Session 20, run B: bench/session20_a.sh again (run B after the warp Cholesky, inv as LU + lu_solve and the test
# fixes; run C after the two-redux pivot search, the fma updates, Cholesky's transpose and getf2's reciprocal).
#   bash bench/session20_b.sh OUTDIR
exec bash "$(dirname "$0")/session20_a.sh" "$@"
