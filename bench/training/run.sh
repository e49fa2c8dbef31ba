#!/usr/bin/env bash
# bench/training: samples/s of fl_sgd_run (non-private and DP-SGD with ghost clipping) on
# Fashion-MNIST-sized random data, and normals/s of fl_gauss_fill (build/bench/training).
# BENCH_REPEATS (default 5) timed runs per figure, BENCH_STEPS steps each (default ~0.3 s of work).
set -eu
BUILD=${BUILD:-build}
nice -n 10 "$BUILD/bench/training"
