// Package gpu is the llama-family forward pass (llama, qwen2, qwen3) on a
// CUDA device, beside the CPU one in model/llama; the kernels it launches
// are kernels/cuda's.
//
//   - load.go: the shape and the weights read straight from a GGUF file
//     (never through the CPU loader, which may rewrite Q4_0, Q5_0, Q5_1, Q8_0 and K-quant
//     blocks in place) and uploaded as they are.
//   - decoder.go, forward.go: Decoder holds the weights and activation
//     buffers; Forward runs a whole batch (prompt chunks and decode tokens
//     of many sequences) on the device and copies back only the wanted
//     logits rows.
//   - kv.go: KV is the paged F16 K/V store in device memory; CopyPage is a
//     device-to-device page copy (copy-on-write forks).
//   - decoder_greedy.go: on-device argmax and top-k/top-p sampling, with
//     CUDA-graph replay of decode steps.
//   - device.go: Open resolves --device auto|cpu|cuda[:N].
//
// Without a GPU the tests run on kernels/cuda/cudaemu, the fake driver with
// a CPU emulator of every kernel.
package gpu
