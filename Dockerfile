# Flint: one static binary in a minimal, non-root image.
#
#   docker build --build-arg VERSION="$(git describe --always --dirty)" -t flint .
#   docker run --rm -p 8080:8080 -e DATABASE_URL=... flint            # serve
#   docker run --rm -e DATABASE_URL=... --no-healthcheck flint worker  # a worker pool
#
# See docs/deploy.md.

# ---- build ------------------------------------------------------------------
FROM golang:1.26-bookworm AS build

WORKDIR /src

# Modules first, in their own layer: it is rebuilt only when go.mod or go.sum
# change, not on every source edit.
COPY go.mod go.sum ./
RUN go mod download && go mod verify

COPY . .

ARG VERSION=dev
# CGO off: a static binary that needs no libc in the final image.
# timetzdata: embed the time zone database, so cron series in any time zone
# work whatever the base image carries.
RUN CGO_ENABLED=0 go build -trimpath -tags timetzdata \
      -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/flint . \
 && /out/flint version

# ---- run --------------------------------------------------------------------
# distroless/static: CA certificates (for https and smtps), /etc/passwd with
# the nonroot user, no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot

ARG VERSION=dev
LABEL org.opencontainers.image.title="flint" \
      org.opencontainers.image.description="Flint: background jobs on PostgreSQL (API, workers and scheduler in one binary)" \
      org.opencontainers.image.version="${VERSION}"

COPY --from=build /out/flint /flint

# nonroot (65532) by number, so runtimes that check runAsNonRoot accept it.
USER 65532:65532

# Logs go to stdout, which the container runtime collects, and (batched,
# scrubbed) to the database, where the dashboard's Logs page shows those of
# every Flint container. Nothing is written to the file system, so a
# read-only root file system works.
ENV FLINT_ADDR=:8080

EXPOSE 8080

# The binary checks itself (the image has no curl or wget): "flint healthcheck"
# GETs /healthz on FLINT_ADDR and exits 0 on 200. Only serve and api listen on
# HTTP: run worker and scheduler containers with the health check disabled.
# The start period leaves time for migrations at start.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["/flint", "healthcheck"]

ENTRYPOINT ["/flint"]
CMD ["serve"]
