# syntax=docker/dockerfile:1
# oengine container images (docs/deploy.md, "Docker").
#
#   docker build -t oengine:latest .                    # CPU image (default)
#   docker build --target cuda -t oengine:cuda .         # with CUDA user-space libraries
#   docker build --build-arg VERSION=0.2.0 -t oengine:0.2.0 .
#
# The binary is pure Go (CGO_ENABLED=0): the CPU image is distroless
# "static" with nothing but the binary and CA certificates. CUDA libraries
# are loaded at run time (kernels/cuda: libcuda.so.1 from the host driver,
# libnvrtc, libcublas, libcublasLt); the dynamic loader they need is not in
# the static image, so GPU hosts use the "cuda" target, a CUDA runtime base
# image, run with the NVIDIA container toolkit (`docker run --gpus all`),
# which mounts the host's driver library.

ARG GO_VERSION=1.26
ARG CUDA_IMAGE=nvidia/cuda:12.8.1-runtime-ubuntu24.04

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=""
# -trimpath: no build paths in the binary; VCS stamping needs .git, which
# .dockerignore leaves out, so `oengine version` reports the VERSION given.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w ${VERSION:+-X main.version=${VERSION}}" \
      -o /out/oengine ./cmd/oengine && \
    /out/oengine version

# GPU image: CUDA user-space libraries from the base image, the driver
# library from the host (NVIDIA container toolkit).
FROM ${CUDA_IMAGE} AS cuda
COPY --from=build /out/oengine /usr/local/bin/oengine
USER 65532:65532
EXPOSE 50051 8080 5556
ENTRYPOINT ["/usr/local/bin/oengine"]
CMD ["serve", "--help"]

# CPU image (the default target: last in this file).
FROM gcr.io/distroless/static-debian12:nonroot AS cpu
COPY --from=build /out/oengine /usr/local/bin/oengine
USER 65532:65532
EXPOSE 50051 8080 5556
ENTRYPOINT ["/usr/local/bin/oengine"]
CMD ["serve", "--help"]
