# oengine: single-node LLM inference engine.
GO        ?= go
BIN       := bin/oengine
# -race needs cgo and a C compiler (docs/design.md §7).
RACE      := $(shell CC=$${CC:-gcc}; command -v $$CC >/dev/null 2>&1 && [ "$$($(GO) env CGO_ENABLED)" = "1" ] && echo -race)
TESTFLAGS ?=
ARGS      ?=

.PHONY: build run test check-layers check-portable bench vet proto fuzz clean

build:
	$(GO) build -o $(BIN) ./cmd/oengine

run: build
	./$(BIN) serve $(ARGS)

test: check-layers check-portable
	$(GO) test $(RACE) -timeout 30m $(TESTFLAGS) ./...
# The server's real-engine suites (conformance, sessions) again with the
# model on the emulated CUDA device (kernels/cuda/cudaemu).
	OENGINE_TEST_DEVICE=cuda-emu $(GO) test $(RACE) -timeout 30m $(TESTFLAGS) ./server
# The CPU kernels and the model again at the AVX2 level (on a CPU with
# AVX-512 the run above tests its own level; this one the paths of CPUs
# without it, such as Q5_0 through the blocked kernels). Elsewhere the
# setting changes nothing.
	GODEBUG=cpu.avx512f=off $(GO) test -timeout 30m $(TESTFLAGS) ./kernels/cpu ./model/llama
# The strict greedy check on every reference prompt (TestReferenceModelsFull)
# and every reference case through the CUDA model on the emulated device
# (TestEmulatedReferenceModels) are left out of race runs (too slow under
# the detector): run them without.
ifneq ($(RACE),)
	$(GO) test -timeout 30m $(TESTFLAGS) -run 'TestReferenceModelsFull|TestReferenceModelsEmulatedCUDA' ./model/verify
	$(GO) test -timeout 30m $(TESTFLAGS) -run 'TestEmulatedReferenceModels' ./model/gpu
# The JSON Schema conformance set at its full 20 generations per schema
# (a subset runs under the detector).
	$(GO) test -timeout 30m $(TESTFLAGS) -run 'TestSchemaConformance' ./grammar/conformance
endif

# The kernels sit below the model: nothing under kernels/ may depend on a
# package under model/ (tensor types come from the leaf package ggml/).
check-layers:
	@bad=$$($(GO) list -deps ./kernels/... | grep '^oengine/model' || true); \
	if [ -n "$$bad" ]; then echo "check-layers: kernels depend on $$bad" >&2; exit 1; fi

# The packages with amd64 assembly must still build elsewhere: their
# *_other.go stubs are compiled only there (arm64 stands for the rest).
check-portable:
	GOARCH=arm64 $(GO) vet ./kernels/... ./sampling

vet:
	$(GO) vet ./...

bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x ./...

proto:
	./proto/gen.sh

clean:
	rm -rf bin
