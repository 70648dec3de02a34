#!/usr/bin/env bash
# gpu-check.sh: the GPU verification of oengine's CUDA path, as one short
# prepared run on a machine with an NVIDIA GPU and no Go toolchain.
#
#   scripts/gpu-check.sh build [A|B]   here (Go, ../shared): fills carry/
#       (git-ignored, at most 60 MiB, xz-compressed) with stripped
#       CGO_ENABLED=0 binaries -- oengine, the kernels/cuda and model/gpu
#       test binaries (go test -c) -- and a set of reference models with
#       their llama.cpp references. The six models do not fit one carry:
#       set A (default) holds tiny-llama-q4_0, -q8_0, -q4_k_m and
#       tiny-qwen3-q4_k_m; set B holds tiny-llama-f16 and tiny-qwen2-q8_0.
#   scripts/gpu-check.sh run           on the GPU machine, from the
#       repository root with carry/ carried: runs the stages below and
#       writes at most 8 files to $OUT, summary.txt first.
#
# Device tool call (fits a 450 s limit, about 5 minutes of work):
#   run(command="bash scripts/gpu-check.sh run", carry=["carry"], timeout_s=450)
#
# Stages (each with its own time limit, so a fault in one cannot mask the
# others; the smoke stage gates the rest):
#   smoke    60 s   nvidia-smi, driver / NVRTC / cuBLAS files and versions,
#                   the device opened by oengine (kernels compiled)
#   kernels  70 s   kernel parity tests against their CPU twins (cuda.test)
#   models  110 s   oengine verify --device cuda on each carried model (20 s
#                   each), and model/gpu's reference and greedy tests (40 s)
#   serve    90 s   oengine serve --device cuda + oengine bench serve at
#                   concurrency 1, 8, 64 (every request must complete)
#   perf    120 s   copy bandwidth, cuBLAS GEMM rate, quantized tensor-core
#                   GEMM at 2048 tokens against cuBLAS on the same shapes,
#                   decode batch 1 / 32 and 2048-token prefill on seeded
#                   llama3-8b shapes
#                   (F16, Q8_0, Q4_0); llama.cpp side by side: skipped
#   spec     40 s   (into perf.txt) synth tinyllama-1.1b F16 and its Q4_0
#                   twin built there, bench model: plain decode, n-gram and
#                   draft-model speculation (each step bounded; 40 s on the
#                   H200, 2026-12-04)
# Files: summary.txt smoke.txt kernels.txt models.txt serve.txt perf.txt
#
# DRY=1 scripts/gpu-check.sh run  (OUT set) runs the same plumbing on a
# machine without a GPU: --device cpu, GPU tests skipped, smoke not gating.
set -u
mode=${1:-run}
set_name=${2:-A}
root=$(cd "$(dirname "$0")/.." && pwd)
carry="$root/carry"

models_A="tiny-llama-q4_0 tiny-llama-q8_0 tiny-llama-q4_k_m tiny-qwen3-q4_k_m"
models_B="tiny-llama-f16 tiny-qwen2-q8_0"

build() {
	set -e
	cd "$root"
	rm -rf "$carry"
	mkdir -p "$carry"
	local tmp
	tmp=$(mktemp -d)
	export CGO_ENABLED=0
	go build -o "$tmp/oengine" -ldflags='-s -w' ./cmd/oengine
	go test -c -o "$tmp/cuda.test" -ldflags='-s -w' ./kernels/cuda
	go test -c -o "$tmp/gpu.test" -ldflags='-s -w' ./model/gpu
	local src="$root/../shared/testdata/models" list
	case "$set_name" in
	A) list=$models_A ;;
	B) list=$models_B ;;
	*)
		echo "unknown model set $set_name (A or B)" >&2
		exit 2
		;;
	esac
	for m in $list; do
		cp "$src/$m.gguf" "$src/$m.ref.json" "$tmp/"
	done
	for f in "$tmp"/*; do
		xz -6 -T2 -c "$f" >"$carry/$(basename "$f").xz"
	done
	rm -rf "$tmp"
	echo "$set_name" >"$carry/SET"
	du -sh "$carry"
	local kib
	kib=$(du -sk "$carry" | cut -f1)
	if [ "$kib" -gt $((60 * 1024)) ]; then
		echo "carry/ is ${kib} KiB, more than 60 MiB" >&2
		exit 1
	fi
}

# stage NAME LIMIT CMD...: run CMD with a time limit, appending its output
# to $OUT/NAME.txt and its status line to the summary.
stage() {
	local name=$1 limit=$2
	shift 2
	local t0=$SECONDS
	echo "== $* (limit ${limit}s)" >>"$OUT/$name.txt"
	timeout -k 5 "$limit" "$@" >>"$OUT/$name.txt" 2>&1
	local rc=$?
	local verdict=ok
	[ "$rc" -eq 0 ] || verdict=FAIL
	[ "$rc" -eq 124 ] && verdict=TIMEOUT
	printf '%-8s %-7s rc=%-3s %4ss  %s\n' "$name" "$verdict" "$rc" "$((SECONDS - t0))" "$(basename "$1") ${*:2:3}" >>"$OUT/stages.tmp"
	return "$rc"
}

unpack() {
	local bin=/tmp/oengine-gpu-check
	rm -rf "$bin"
	mkdir -p "$bin"
	for f in "$carry"/*.xz; do
		local out="$bin/$(basename "$f" .xz)"
		if command -v xz >/dev/null; then
			xz -dc "$f" >"$out"
		else
			python3 -c 'import lzma,sys; open(sys.argv[2],"wb").write(lzma.open(sys.argv[1]).read())' "$f" "$out"
		fi
	done
	chmod +x "$bin/oengine" "$bin"/*.test
	echo "$bin"
}

smoke() {
	{
		date -u
		nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.max.memory,compute_cap --format=csv 2>&1
		echo "--- libraries (ldconfig, CUDA roots, pip wheels)"
		ldconfig -p 2>/dev/null | grep -E 'libcuda\.so|libnvrtc|libcublas' || true
		ls -d /usr/local/cuda*/lib64/libnvrtc* /usr/local/cuda*/lib64/libcublas* 2>/dev/null | head
		python3 - <<'PY' 2>&1 || true
import glob, site
dirs = site.getsitepackages() + [site.getusersitepackages()]
for d in dirs:
    for p in sorted(glob.glob(d + "/nvidia/*/lib/lib*.so*")):
        if any(k in p for k in ("nvrtc", "cublas")):
            print(p)
PY
	} >>"$OUT/smoke.txt" 2>&1
	# Opens device 0 with the driver, NVRTC and cuBLAS, compiles the kernels
	# (cached for the later stages) and prints the device.
	stage smoke 60 "$BIN/cuda.test" -test.run '^TestGPUInfo$' -test.v -test.count=1
}

kernels() {
	(cd "$root/kernels/cuda" && stage kernels 70 "$BIN/cuda.test" -test.run 'GPU' -test.v -test.count=1 -test.timeout=65s)
}

models() {
	local rc=0 m
	for ref in "$BIN"/*.ref.json; do
		m=${ref%.ref.json}
		stage models 20 "$BIN/oengine" verify "$m.gguf" --ref "$ref" --device "$DEVICE" || rc=1
	done
	# The reference check at the test level (GEMV-only and cuBLAS arithmetic)
	# and free-running greedy with CUDA graphs, on the same files.
	(cd "$root/model/gpu" && OENGINE_REF_MODELS="$BIN" stage models 35 "$BIN/gpu.test" \
		-test.run 'TestGPUReferenceModels|TestGPUGreedy' -test.v -test.count=1 -test.timeout=30s) || rc=1
	return $rc
}

serve() {
	local m
	m=$(ls "$BIN"/*.gguf | head -1)
	"$BIN/oengine" serve "$m" --device "$DEVICE" --grpc-addr 127.0.0.1:50151 --http-addr 127.0.0.1:8151 \
		--max-running 64 >>"$OUT/serve.txt" 2>&1 &
	local pid=$!
	local up=0
	for _ in $(seq 60); do
		if (exec 3<>/dev/tcp/127.0.0.1/8151) 2>/dev/null; then # listening: the model is loaded
			up=1
			break
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.5
	done
	local rc=1
	if [ "$up" = 1 ]; then
		stage serve 60 "$BIN/oengine" bench serve --addr 127.0.0.1:50151 --url http://127.0.0.1:8151 \
			--sweep 1,8,64 --requests 16 --requests-per-concurrency 2 --input-len 64~16 --output-len 32 \
			--timeout 60s
		rc=$?
	else
		echo "serve did not become ready" >>"$OUT/serve.txt"
		printf '%-8s %-7s server not ready\n' serve FAIL >>"$OUT/stages.tmp"
	fi
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	return $rc
}

perf() {
	(cd "$root/kernels/cuda" && stage perf 20 "$BIN/cuda.test" -test.run '^$' -test.bench 'GPUCopy|GPUGemm|GPUQuantGemm' \
		-test.benchtime 1x -test.timeout=18s)
	# The int8 decode GEMV on the largest llama3-8b shape at batch 1 and 32,
	# and prefill attention (tensor cores against the scalar kernel).
	(cd "$root/kernels/cuda" && stage perf 10 "$BIN/cuda.test" -test.run '^$' -test.bench 'GPUGemvQ8/(Q4_0|Q8_0)/4096x14336/n=(1|32)$' \
		-test.benchtime 1x -test.timeout=9s)
	(cd "$root/kernels/cuda" && stage perf 10 "$BIN/cuda.test" -test.run '^$' -test.bench 'GPUAttnPrefill' \
		-test.benchtime 1x -test.timeout=9s)
	# (GPUDecode$: not BenchmarkGPUDecodeStep, the profile mode's.)
	(cd "$root/model/gpu" && stage perf 80 "$BIN/gpu.test" -test.run '^$' -test.bench 'GPUDecode$|GPUPrefill$' \
		-test.benchtime 1x -test.timeout=75s)
}

# spec: speculative decoding on the device (the issue's speculative
# benchmark): target synth tinyllama-1.1b F16, draft the same seed in Q4_0,
# both built here from the seed; plain decode, n-gram (adaptive and K=4)
# and the draft model (adaptive and K=2), greedy, output checked equal.
spec() {
	local tl=/tmp/oengine-spec
	mkdir -p "$tl"
	stage perf 40 "$BIN/oengine" synth --preset tinyllama-1.1b --type f16 -o "$tl/f16.gguf" || return 1
	stage perf 40 "$BIN/oengine" synth --preset tinyllama-1.1b --type q4_0 -o "$tl/q4_0.gguf" || return 1
	stage perf 25 "$BIN/oengine" bench model "$tl/f16.gguf" --device "$DEVICE" --pp 512 --tg 128 --reps 3
	stage perf 25 "$BIN/oengine" bench model "$tl/f16.gguf" --device "$DEVICE" --spec-ngram --tg 128 --reps 3
	stage perf 25 "$BIN/oengine" bench model "$tl/f16.gguf" --device "$DEVICE" --spec-ngram --spec-adaptive=false --spec-tokens 4 --tg 128 --reps 3
	stage perf 25 "$BIN/oengine" bench model "$tl/f16.gguf" --device "$DEVICE" --draft-model "$tl/q4_0.gguf" --tg 128 --reps 3
	stage perf 25 "$BIN/oengine" bench model "$tl/f16.gguf" --device "$DEVICE" --draft-model "$tl/q4_0.gguf" --spec-adaptive=false --spec-tokens 2 --tg 128 --reps 3
	rm -rf "$tl"
}

# figures writes the performance lines and the targets of the issue.
figures() {
	awk '
	/BenchmarkGPUCopy/ { for (i = 1; i < NF; i++) if ($(i+1) == "GB/s") bw = $i }
	/BenchmarkGPUGemm/ { for (i = 1; i < NF; i++) if ($(i+1) == "TFLOPS") gemm = $i }
	/BenchmarkGPUQuantGemm\// {
		k = $1; sub(/^BenchmarkGPUQuantGemm\//, "", k); sub(/-[0-9]+$/, "", k)
		for (i = 1; i < NF; i++) {
			if ($(i+1) == "TFLOPS") qg[k] = $i
			if ($(i+1) == "cuBLAS_TFLOPS") qb[k] = $i
			if ($(i+1) == "of_cuBLAS") qr[k] = $i
		}
		if ((k in qr) && !(k in seen)) { seen[k] = 1; qn[++nq] = k }
	}
	/BenchmarkGPUGemvQ8\// {
		k = $1; sub(/^BenchmarkGPUGemvQ8\//, "", k); sub(/-[0-9]+$/, "", k)
		for (i = 1; i < NF; i++) if ($(i+1) == "GB/s") gq[k] = $i
		if ((k in gq) && !(k in gseen)) { gseen[k] = 1; gn[++ngq] = k }
	}
	/BenchmarkGPUAttnPrefill\// {
		k = $1; sub(/^BenchmarkGPUAttnPrefill\//, "", k); sub(/-[0-9]+$/, "", k)
		for (i = 1; i < NF; i++) if ($(i+1) == "TFLOPS") ap[k] = $i
		if ((k in ap) && !(k in aseen)) { aseen[k] = 1; an[++nap] = k }
	}
	/BenchmarkGPUDecode\// {
		split($1, p, "/"); t = p[3]; sub(/-[0-9]+$/, "", t)
		for (i = 1; i < NF; i++) {
			if ($(i+1) == "tok/s@B1") b1[t] = $i
			if ($(i+1) == "tok/s@B32") b32[t] = $i
			if ($(i+1) == "GB/step") gb[t] = $i
		}
		types[t] = 1
	}
	/BenchmarkGPUPrefill\// {
		split($1, p, "/"); t = p[3]; sub(/-[0-9]+$/, "", t)
		for (i = 1; i < NF; i++) if ($(i+1) == "TFLOPS") pf[t] = $i
		types[t] = 1
	}
	END {
		printf "copy bandwidth %s GB/s, cuBLAS F16 GEMM %s TFLOPS (llama3-8b layer shapes, 2048 tokens)\n", bw, gemm
		for (j = 1; j <= nq; j++) {
			k = qn[j]
			printf "quantized GEMM %-16s %6.1f TFLOPS = %.2f of cuBLAS F16 on the shape (%.1f) (target >= 0.5: %s)\n",
				k, qg[k], qr[k], qb[k], (qr[k] >= 0.5) ? "met" : "NOT met"
		}
		for (j = 1; j <= ngq; j++) {
			k = gn[j]
			printf "int8 GEMV %-28s %7.1f GB/s = %.2f of copy bandwidth\n", k, gq[k], (bw > 0) ? gq[k] / bw : 0
		}
		for (j = 1; j <= nap; j++) printf "prefill attention %-20s %6.1f TFLOPS\n", an[j], ap[an[j]]
		for (t in types) {
			frac = (bw > 0) ? gb[t] * b1[t] / bw : 0
			need = (t == "F16") ? 0.75 : 0.6
			ratio = (b1[t] > 0) ? b32[t] / b1[t] : 0
			pr = (gemm > 0) ? pf[t] / gemm : 0
			r12 = (t == "Q8_0") ? "no target" : ((ratio >= 12) ? "target >= 12: met" : "target >= 12: NOT met")
			printf "%-5s decode B1 %7.1f tok/s = %.2f of bandwidth (target >= %.2f: %s); B32 %8.1f tok/s = %.1fx B1 (%s); prefill 2048 %.1f TFLOPS = %.2f of cuBLAS (target >= 0.5: %s)\n",
				t, b1[t], frac, need, (frac >= need) ? "met" : "NOT met", b32[t], ratio, r12,
				pf[t], pr, (pr >= 0.5) ? "met" : "NOT met"
		}
	}' "$OUT/perf.txt"
}

run() {
	: "${OUT:?OUT must name the results folder}"
	cd "$root"
	: >"$OUT/stages.tmp"
	BIN=$(unpack)
	export OENGINE_CUDA_CACHE=/tmp/oengine-cuda-cache
	DEVICE=cuda
	if [ "${DRY:-0}" = 1 ]; then
		DEVICE=cpu
	else
		export REQUIRE_GPU=1
	fi
	local t0=$SECONDS ok_smoke=1
	smoke || ok_smoke=0
	[ "${DRY:-0}" = 1 ] && ok_smoke=1
	if [ "$ok_smoke" = 1 ]; then
		kernels
		models
		serve
		perf
		spec
	fi
	{
		echo "oengine GPU check, model set $(cat "$carry/SET" 2>/dev/null), $(date -u), ${SECONDS}s in all"
		grep -m1 -E '^[^,]+, [0-9.]+, ' "$OUT/smoke.txt" | sed 's/^/gpu: /'
		grep -m1 -E 'cuda:0 .*sm_' "$OUT/smoke.txt" | sed 's/^ *//; s/^/device: /'
		echo
		echo "stages:"
		cat "$OUT/stages.tmp"
		if [ "$ok_smoke" = 0 ]; then
			echo
			echo "SMOKE FAILED: the device, driver, NVRTC or cuBLAS is not usable; later stages skipped. Last lines:"
			tail -15 "$OUT/smoke.txt"
		else
			echo
			echo "kernel parity:"
			grep -E '^(--- FAIL|ok|FAIL|PASS)' "$OUT/kernels.txt" | head -12
			echo
			echo "reference models (oengine verify --device cuda):"
			awk '/^model / { name = $2; sub(/:$/, "", name); n = split(name, q, "/"); name = q[n] }
				/^(PASS|FAIL): [0-9]+\/[0-9]+ cases/ { print "  " name ": " $0 }
				/^    - / && fails++ < 6 { print "  " $0 }' "$OUT/models.txt"
			grep -E 'gpu_model_test.go:[0-9]+: .*exact=' "$OUT/models.txt" | sed 's/^ *//' | head -16
			echo
			echo "serving (oengine bench serve; every request must be ok, err 0):"
			grep -E '^ +(target|grpc)' "$OUT/serve.txt" | head -5
			echo
			echo "performance (llama.cpp side by side: skipped, not built on the device machine):"
			figures
			echo
			echo "tinyllama-1.1b F16 (synth, seed 1): plain and speculative decode (bench model):"
			grep -E '^\| .*(pp|tg)[0-9]|speculative .* tok/s' "$OUT/perf.txt"
		fi
	} >"$OUT/summary.txt"
	rm -f "$OUT/stages.tmp"
	echo "done in $((SECONDS - t0))s; see $OUT/summary.txt"
}

# profile: where a decode step's time goes, for kernel work (about a
# minute on the H200; no reference models needed): the GEMV and decode-attention
# kernels at 50 launches each, then, on decode steps of a 4-layer
# Llama-3-8B-shaped model without graph replay (BenchmarkGPUDecodeStep),
# ncu's per-kernel device time (Q4_0 and F16, B=1) and its speed-of-light,
# occupancy and warp-stall sections for the decode GEMVs and attention
# (Q4_0 and F16). Writes profile.txt and ncu.txt to $OUT.
#   run(command="bash scripts/gpu-check.sh profile", carry=["carry"], timeout_s=300)
profile() {
	: "${OUT:?OUT must name the results folder}"
	cd "$root"
	BIN=$(unpack)
	export OENGINE_CUDA_CACHE=/tmp/oengine-cuda-cache REQUIRE_GPU=1
	local t0=$SECONDS
	"$BIN/cuda.test" -test.run '^TestGPUInfo$' -test.count=1 >"$OUT/profile.txt" 2>&1 || {
		cat "$OUT/profile.txt"
		return 1
	}
	(cd "$root/kernels/cuda" && timeout -k 5 60 "$BIN/cuda.test" -test.run '^$' \
		-test.bench 'GPUGemv/F16/.*|GPUGemvQ8/(Q4_0|Q8_0)/.*/n=(1|8)$|GPUAttnDecode' -test.benchtime 50x -test.timeout=58s) >>"$OUT/profile.txt" 2>&1
	local ncu
	ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
	if [ -z "$ncu" ]; then
		echo "no ncu found" >>"$OUT/profile.txt"
	else
		local typ skip
		for typ in Q4_0 F16; do
			echo "=== ncu per-kernel time, $typ B=1, 4 layers, 3 steps without graphs" >>"$OUT/ncu.txt"
			(cd "$root/model/gpu" && OENGINE_BENCH_TYPES=$typ OENGINE_BENCH_BATCHES=1 OENGINE_BENCH_STEPS=3 \
				timeout -k 5 45 "$ncu" --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel \
				"$BIN/gpu.test" -test.run '^$' -test.bench 'GPUDecodeStep/.*/.*/graphs=false' -test.benchtime 1x) >>"$OUT/ncu.txt" 2>&1
		done
		# Sections of one decode step's GEMVs and attention. Launches to
		# skip: the 16-token prefill's matching ones (Q4_0: 29 int8 GEMVs,
		# 7 per layer and the output; F16: one, cuBLAS takes 16 tokens).
		for typ in Q4_0 F16; do
			skip=29
			[ "$typ" = F16 ] && skip=1
			echo "=== ncu sections, $typ B=1 decode kernels" >>"$OUT/ncu.txt"
			(cd "$root/model/gpu" && OENGINE_BENCH_TYPES=$typ OENGINE_BENCH_BATCHES=1 OENGINE_BENCH_STEPS=2 \
				timeout -k 5 40 "$ncu" --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
				--section WarpStateStats -k 'regex:gemv|attn_decode' --launch-skip $skip --launch-count 5 \
				"$BIN/gpu.test" -test.run '^$' -test.bench 'GPUDecodeStep/.*/.*/graphs=false' -test.benchtime 1x) >>"$OUT/ncu.txt" 2>&1
		done
	fi
	echo "profile done in $((SECONDS - t0))s"
	grep -E 'decode step|^Benchmark' "$OUT/profile.txt"
}

case "$mode" in
build) build ;;
run) run ;;
profile) profile ;;
*)
	echo "usage: $0 build [A|B] | run | profile" >&2
	exit 2
	;;
esac
