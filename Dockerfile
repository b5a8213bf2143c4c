# syntax=docker/dockerfile:1
#
# The `noema` image: one binary, every role. The pod's arguments choose what runs:
#   noema up --data-dir /data --http-addr 0.0.0.0:8080 --grpc-addr 0.0.0.0:50051   (default CMD)
#   noema serve identity | noema serve ledger | noema serve gateway                (split shape)
#   noema migrate                                                                  (migration job)
#
#   docker build -t noema:0.1.0 .
#
# BuildKit (the default builder since Docker 23) is required for the cache mounts.

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm

# --- build ----------------------------------------------------------------------------
FROM rust:${RUST_VERSION}-${DEBIAN_RELEASE} AS build
WORKDIR /src
# Protobuf is compiled by protox (pure Rust) and SQLite is bundled, so the stock image's
# C toolchain is all the build needs. Migrations are embedded at compile time.
COPY . .
ENV CARGO_INCREMENTAL=0 \
    CARGO_TERM_COLOR=never
# The registry and target dir live in cache mounts (kept between builds, never in a
# layer), so the binary is copied out within the same step.
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/usr/local/cargo/git,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    cargo build --release --locked --bin noema \
 && install -D -m 0755 target/release/noema /out/noema \
 && /out/noema --version

# --- runtime --------------------------------------------------------------------------
# Debian slim rather than distroless: operators need `cat` to read the all-in-one owner
# token (`kubectl exec … -- cat /data/owner.token`). The binary links only glibc, libm
# and libgcc_s; TLS is rustls, with system roots from ca-certificates.
FROM debian:${DEBIAN_RELEASE}-slim AS runtime
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 noema \
 && useradd --system --uid 10001 --gid noema --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin noema \
 && install -d -o noema -g noema -m 0750 /data
COPY --from=build /out/noema /usr/local/bin/noema

# Numeric user, so that Kubernetes' runAsNonRoot can verify it without /etc/passwd.
USER 10001:10001
WORKDIR /data
ENV NOEMA__SERVER__DATA_DIR=/data
# 8080 REST gateway, 50051 gRPC (all services in one process), 9090 metrics (split shape).
EXPOSE 8080 50051 9090
# noema handles SIGTERM itself: NOT_SERVING, drain, exit 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/noema"]
CMD ["up", "--data-dir", "/data", "--http-addr", "0.0.0.0:8080", "--grpc-addr", "0.0.0.0:50051"]
