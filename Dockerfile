# Strata as a drop-in for etcd's image: the same binary path
# (/usr/local/bin/etcd, a link to strata, which then runs `strata etcd`),
# the same ports (2379 clients, 2380 peers) and data path (/var/lib/etcd),
# so that a Kubernetes manifest or a Helm chart swaps only its image.
#
#   docker build -t strata .
#   docker run --rm -p 2379:2379 -v strata-data:/var/lib/etcd strata \
#     etcd --name s1 --data-dir /var/lib/etcd \
#       --listen-client-urls http://0.0.0.0:2379 --advertise-client-urls http://127.0.0.1:2379
#
# The binary is static (CGO_ENABLED=0): Pebble then keeps its memtables in
# Go's heap instead of C's malloc (internal/cmalloc tunes the latter), so
# RSS reads somewhat differently from the cgo build the benchmarks use.
# It runs as the distroless nonroot user (65532): the data directory must
# be writable by it (docs/etcd-flags.md, "Containers").

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/bin/strata ./cmd/strata \
 && ln -s strata /out/bin/etcd \
 && mkdir -p /out/var/lib/etcd

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/bin/ /usr/local/bin/
COPY --from=build --chown=65532:65532 /out/var/lib/etcd /var/lib/etcd
USER 65532:65532
EXPOSE 2379 2380
VOLUME /var/lib/etcd
ENTRYPOINT ["/usr/local/bin/etcd"]
CMD ["--name", "default", "--data-dir", "/var/lib/etcd", "--listen-client-urls", "http://0.0.0.0:2379", "--advertise-client-urls", "http://127.0.0.1:2379"]
