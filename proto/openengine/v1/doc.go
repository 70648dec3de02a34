// Package openenginev1 holds the generated Go code of the OpenEngine v1 gRPC
// contract (package openengine.v1) and oengine's wire-compatible additions
// (generation sessions and streamed input).
//
// The .proto sources sit beside the generated files; proto/gen.sh
// regenerates them. Builds never run protoc.
package openenginev1

// Schema identity that a server reports in ServerInfo.
const (
	// SchemaRevision is the contract revision these files implement.
	SchemaRevision = 1
	// MinimumClientRevision is the oldest client revision accepted.
	MinimumClientRevision = 1
	// SchemaRelease is the immutable upstream commit the upstream part of
	// these files is wire-identical to (ai-dynamo/openengine).
	SchemaRelease = "4def7c50b05e0674a0c3b26917399155535966e4"
)
