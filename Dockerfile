# jobsched image: a static Go binary on distroless, run as the nonroot user.
#
#   docker build --build-arg VERSION="$(git describe --tags --always --dirty)" -t ghcr.io/jobsched/jobsched:v0.1.0 .
#
# scripts/check-image-build.sh builds the binary the same way without a container engine and checks it.

# Builder. golang:1.26 follows the newest 1.26.x patch release (go.mod needs go >= 1.26.0); for a byte-for-byte
# reproducible build pin the exact patch and digest instead, e.g. golang:1.26.8-bookworm@sha256:<digest>.
FROM golang:1.26 AS build
WORKDIR /src

# Modules first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download

COPY . .
ARG VERSION=dev
# scripts/check-image-build.sh requires this exact line: change both together.
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/jobsched/jobsched/pkg/version.Version=${VERSION}" -o /out/jobsched .

# Runtime: no shell, no package manager; static-debian12 has CA certificates, tzdata and a nonroot user (65532).
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.source="https://github.com/jobsched/jobsched" \
      org.opencontainers.image.title="jobsched" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/jobsched /jobsched
USER 65532:65532
ENTRYPOINT ["/jobsched"]
