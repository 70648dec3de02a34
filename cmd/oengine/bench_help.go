package main

// Help of the bench subcommands (their flags are in bench.go and
// bench_model.go; flagSet prints them).
func init() {
	helpTable["bench serve"] = cmdHelp{
		summary:  "drive a running server with a workload and report throughput and latency",
		synopsis: "[flags]   (or: --compare A.json B.json)",
		maxArgs:  2, // A.json B.json with --compare
		examples: []string{
			"oengine bench serve --target grpc --addr 127.0.0.1:50051 --sweep 1,2,4,8 --json run.json",
			"oengine bench serve --target sse --scenario multiturn --turns 4 --requests 32",
			"oengine bench serve --scenario soak --duration 30m --concurrency 4 --cancel-fraction 0.1 --stall-fraction 0.05 --stall-for 8s",
		}}
	helpTable["bench model"] = cmdHelp{
		summary:  "prefill and decode throughput of a GGUF model in this process (llama-bench-like)",
		synopsis: "[MODEL.gguf] [flags]", modelArg: true,
		examples: []string{
			"oengine bench model ~/models/qwen2.5-0.5b-instruct-q8_0.gguf --pp 512 --tg 128 --membw",
			"oengine bench model --model m.gguf --reps 3 --json",
		}}
	helpTable["bench compare"] = cmdHelp{
		summary:  "B/A ratios of two bench serve JSON files",
		synopsis: "A.json B.json", maxArgs: 2,
		examples: []string{"oengine bench compare before.json after.json"}}
	helpTable["bench chart"] = cmdHelp{
		summary:  "one SVG sweep chart of several bench serve JSON files",
		synopsis: "-o OUT.svg A.json [B.json ...]", maxArgs: -1,
		examples: []string{"oengine bench chart -o sweep.svg oengine.json llama-server.json"}}
}
