# syntax=docker/dockerfile:1.7
# hpa-bridge: build with the Rust toolchain, run on distroless (no shell, no package manager)
# as the non-root user 65532.
#   docker build -t registry.example/hpa-bridge:0.1.0 .

# kube-runtime 5 needs Rust 1.89 or newer. Only the server is built (the bench is its own
# binary, hpa-bridge-bench), and it ships stripped: the release profile keeps line tables for
# local profiling, which the image has no use for (115 MB -> 21 MB).
FROM rust:1.89-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY crates ./crates
# `serve --demo` builds examples/local.yaml in.
COPY examples ./examples
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin hpa-bridge \
    && install -D -m 0755 target/release/hpa-bridge /out/hpa-bridge \
    && strip /out/hpa-bridge

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/hpa-bridge /hpa-bridge
# The nonroot image's user; manifests/base/deployment.yaml runs with the same uid and
# runAsNonRoot needs it numeric.
USER 65532:65532
# HTTPS: external.metrics.k8s.io and /livez, /readyz (docs/hpa-behaviour.md §3.4).
EXPOSE 6443
ENTRYPOINT ["/hpa-bridge"]
# In a pod the chart and manifests pass their own arguments. Outside one, the local demo:
#   docker run --rm --network host registry.example/hpa-bridge:0.1.0 serve --demo
CMD ["serve", "--bind-address=0.0.0.0", "--secure-port=6443"]
