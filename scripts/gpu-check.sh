#!/usr/bin/env bash
# gpu-check.sh: the GPU verification of kernels/cuda (issue 8).
#
#   scripts/gpu-check.sh build   on a dev machine (Go toolchain, ../shared):
#                                fills carry/ (git-ignored) with stripped
#                                CGO_ENABLED=0 test binaries, the oengine
#                                binary and one reference model.
#   scripts/gpu-check.sh run     on the GPU machine (no Go there), from the
#                                repository root with carry/ carried:
#                                runs everything and writes results to $OUT.
#
# The device tool call is:  run(command="bash scripts/gpu-check.sh run",
#                               carry=["carry"], timeout_s=590)
# Results: $OUT/summary.txt (one line per step with its exit code),
# $OUT/env.txt, $OUT/cuda-test.txt, $OUT/cuda-bench.txt, $OUT/bench-*.txt.
set -u
mode=${1:-run}
root=$(cd "$(dirname "$0")/.." && pwd)
carry="$root/carry"

build() {
	set -e
	cd "$root"
	mkdir -p "$carry"
	export CGO_ENABLED=0
	go test -c -o "$carry/cuda.test" -ldflags='-s -w' ./kernels/cuda
	if [ -d cmd/oengine ]; then
		go build -o "$carry/oengine" -ldflags='-s -w' ./cmd/oengine || echo "oengine binary not built" >&2
	fi
	models="$root/../shared/testdata/models"
	if [ -f "$models/tiny-llama-q4_0.gguf" ]; then
		cp "$models/tiny-llama-q4_0.gguf" "$models/tiny-llama-q4_0.ref.json" "$carry/"
	fi
	du -sh "$carry"
	ls -la "$carry"
}

step() { # step NAME TIMEOUT CMD...: run with a timeout, log to $OUT/NAME.txt
	local name=$1 limit=$2
	shift 2
	local t0=$SECONDS
	timeout "$limit" "$@" >"$OUT/$name.txt" 2>&1
	local rc=$?
	echo "$name rc=$rc $((SECONDS - t0))s" | tee -a "$OUT/summary.txt"
	return 0
}

run() {
	: "${OUT:?OUT must name the results folder}"
	cd "$root"
	: >"$OUT/summary.txt"
	{
		date -u
		nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.max.memory,compute_cap --format=csv 2>&1
		nvidia-smi 2>&1 | head -15
		echo "--- libraries"
		ldconfig -p 2>/dev/null | grep -E 'libcuda\.so|libnvrtc|libcublas' || true
		ls /usr/local/cuda*/lib64/ 2>/dev/null | grep -E 'nvrtc|cublas' | head
		python3 - <<'PY' 2>&1 || true
import glob, site, sys
dirs = site.getsitepackages() + [site.getusersitepackages()]
for d in dirs:
    for p in sorted(glob.glob(d + "/nvidia/*/lib/lib*.so*")):
        if any(k in p for k in ("nvrtc", "cublas")):
            print(p)
PY
	} >"$OUT/env.txt" 2>&1
	# One compile cache for every step (the first Open compiles, ~30 s).
	export OENGINE_CUDA_CACHE=/tmp/oengine-cuda-cache
	export REQUIRE_GPU=1
	chmod +x "$carry"/*.test "$carry/oengine" 2>/dev/null
	# Test binaries run in their package folder, as go test runs them.
	cd "$root/kernels/cuda"
	step cuda-test 220 "$carry/cuda.test" -test.v -test.count=1 -test.timeout=210s
	step cuda-bench 110 "$carry/cuda.test" -test.run='^$' -test.bench='GPUGemv|GPUAttn' -test.benchtime=20x -test.timeout=100s
	step cuda-decode 180 "$carry/cuda.test" -test.run='^$' -test.bench='GPUDecode' -test.benchtime=1x -test.timeout=170s
	cd "$root"
	# Model-level checks need oengine's GPU path (--device); run them when present.
	if [ -x "$carry/oengine" ] && "$carry/oengine" bench model --help 2>&1 | grep -q -- '--device'; then
		for m in "tinyllama-1.1b f16" "tinyllama-1.1b q8_0" "llama3-8b f16" "llama3-8b q8_0"; do
			set -- $m
			f="/tmp/$1-$2.gguf"
			step "synth-$1-$2" 120 "$carry/oengine" synth -preset "$1" -type "$2" -o "$f"
			step "bench-$1-$2" 150 "$carry/oengine" bench model --device cuda --model "$f" --batch 1,32
			rm -f "$f"
		done
	else
		echo "model-bench skipped: carry/oengine has no 'bench model --device'" | tee -a "$OUT/summary.txt"
	fi
	grep -E '^(--- FAIL|FAIL|ok|PASS)' "$OUT/cuda-test.txt" | head -40 >>"$OUT/summary.txt"
	grep -E 'GB/s' "$OUT/cuda-bench.txt" >>"$OUT/summary.txt"
	grep -E '^decode ' "$OUT/cuda-decode.txt" >>"$OUT/summary.txt"
}

case "$mode" in
build) build ;;
run) run ;;
*)
	echo "usage: $0 build|run" >&2
	exit 2
	;;
esac
