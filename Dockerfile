# fleetform: one image for the hub controller (`fleetform hub`, `fleetform sync`) and the agent
# (`fleetform agent`). Build: docker build -t ghcr.io/fleetform/fleetform:0.1.0 .
FROM rust:1-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY crates ./crates
COPY schemas ./schemas
COPY src ./src
COPY benches ./benches
RUN cargo build --release --locked --bin fleetform

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/fleetform /usr/local/bin/fleetform
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/fleetform"]
