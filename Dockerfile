# Prescient's image: the one binary (serve, agent, collect, train, ...) that
# deploy/kubernetes runs. Build it from the repository root:
#   make image IMAGE=REGISTRY/prescient:TAG      (docker build underneath)
# go-nvml is cgo and opens libnvidia-ml.so.1 only at run time, so the binary
# is linked against glibc and the runtime image is a glibc one; the NVIDIA
# container toolkit mounts the driver's library into the agent's container
# (NVIDIA_DRIVER_CAPABILITIES=utility in base/agent.yaml).

ARG GO_VERSION=1.26
FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/prescient ./cmd/prescient

FROM debian:bookworm-slim
# ca-certificates: an InfluxDB or API server reached over TLS.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/prescient /usr/local/bin/prescient
# Not root by default; the node agent's DaemonSet asks for root itself.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/prescient"]
