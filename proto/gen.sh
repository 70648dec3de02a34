#!/usr/bin/env bash
# Regenerates the Go code for the OpenEngine v1 protos (make proto).
# Needs protoc (Debian: protobuf-compiler) and the pinned plugins:
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
# Builds and tests never need protoc: the generated files are committed.
set -euo pipefail
cd "$(dirname "$0")"
PATH="$(go env GOPATH)/bin:$PATH"
for tool in protoc protoc-gen-go protoc-gen-go-grpc; do
  command -v "$tool" >/dev/null || { echo "gen.sh: $tool not found" >&2; exit 1; }
done
rm -f openengine/v1/*.pb.go
protoc -I . \
  --go_out=. --go_opt=paths=source_relative \
  --go-grpc_out=. --go-grpc_opt=paths=source_relative \
  openengine/v1/*.proto
