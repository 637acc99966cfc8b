#!/usr/bin/env bash
# Build jobsched exactly as the Dockerfile's build stage does, without a container engine, and check the result:
#   - the Dockerfile still has the very build command below (so the two cannot drift apart);
#   - the local Go has the Dockerfile builder's major.minor version;
#   - the binary is statically linked (CGO_ENABLED=0, no ELF interpreter, no shared libraries) and stripped,
#     so it runs on gcr.io/distroless/static (no libc there);
#   - `jobsched version` prints the stamped version.
#
# Usage: scripts/check-image-build.sh [VERSION]      (default: $VERSION, else v0.0.0-check)
# Needs: Linux (it runs the binary), go, readelf (binutils). Exit 0 when every check passes, 1 otherwise.
set -euo pipefail

fail() { echo "check-image-build: FAIL: $*" >&2; exit 1; }
ok() { echo "check-image-build: ok: $*" >&2; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly ROOT
cd "$ROOT"

VERSION=${1:-${VERSION:-v0.0.0-check}}
[[ $VERSION =~ ^[A-Za-z0-9][A-Za-z0-9._+-]*$ ]] || fail "VERSION '$VERSION' must be a plain version string ([A-Za-z0-9._+-])"

# The build of the Dockerfile, verbatim; ${VERSION} is expanded by the Dockerfile's ARG, and below by this script.
# shellcheck disable=SC2016 # single quotes on purpose: this is the Dockerfile's text
readonly LDFLAGS_TEMPLATE='-s -w -X github.com/jobsched/jobsched/pkg/version.Version=${VERSION}'
readonly DOCKERFILE_BUILD_LINE='RUN CGO_ENABLED=0 go build -trimpath -ldflags "'"$LDFLAGS_TEMPLATE"'" -o /out/jobsched .'

# --- the Dockerfile has not drifted ---------------------------------------------------------------------------------
[[ -f Dockerfile ]] || fail "no Dockerfile in $ROOT"
grep -qxF -- "$DOCKERFILE_BUILD_LINE" Dockerfile ||
	fail "the Dockerfile's build stage no longer has this exact line; change the Dockerfile and this script together:
    $DOCKERFILE_BUILD_LINE"
grep -qxE 'ARG VERSION(=.*)?' Dockerfile || fail "the Dockerfile has no 'ARG VERSION' for the ldflags to use"
ok "Dockerfile build line matches"

# --- the tools --------------------------------------------------------------------------------------------------------
[[ $(uname -s) == Linux ]] || fail "run this on Linux: it runs the linux binary it builds and reads its ELF headers"
command -v go >/dev/null || fail "go not found in PATH"
command -v readelf >/dev/null || fail "readelf not found (install binutils)"

# The builder image is golang:X.Y[...]; the local toolchain must be the same Go release line.
image_go=$(sed -nE 's/^FROM golang:([0-9]+\.[0-9]+).* AS build$/\1/p' Dockerfile)
[[ -n $image_go ]] || fail "cannot find 'FROM golang:X.Y… AS build' in the Dockerfile"
local_go=$(go env GOVERSION)
[[ $local_go == "go$image_go" || $local_go == "go$image_go".* ]] ||
	fail "local Go is $local_go but the Dockerfile builds with golang:$image_go; use Go $image_go.x"
ok "Go $local_go matches the builder image golang:$image_go"

# --- build as the Dockerfile does -------------------------------------------------------------------------------------
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-image-build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
bin=$tmp/jobsched
# shellcheck disable=SC2016 # replace the literal text ${VERSION}
ldflags=${LDFLAGS_TEMPLATE//'${VERSION}'/$VERSION}

# Same environment as the golang image: no GOFLAGS from the caller. -buildvcs=false because the image's build
# context has no .git (.dockerignore), so the image's binary carries no VCS stamp either.
echo "check-image-build: CGO_ENABLED=0 go build -trimpath -ldflags \"$ldflags\" -o $bin ." >&2
if ! CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags "$ldflags" -o "$bin" .; then
	fail "go build failed (see above)"
fi
ok "built $(du -h "$bin" | cut -f1) binary"

# --- statically linked and stripped -----------------------------------------------------------------------------------
buildinfo=$(go version -m "$bin") || fail "go version -m cannot read the build info of $bin"
grep -qxF $'\tbuild\tCGO_ENABLED=0' <<<"$buildinfo" || fail "built with cgo (no 'CGO_ENABLED=0' in go version -m):
$buildinfo"
grep -qxF $'\tbuild\t-trimpath=true' <<<"$buildinfo" || fail "not built with -trimpath"
# (With -trimpath, Go does not record -ldflags in the build info: -s is checked on the sections, -X by `version`.)
grep -qxF $'\tbuild\tGOOS=linux' <<<"$buildinfo" || fail "not a linux binary"

headers=$(readelf -lW "$bin") || fail "readelf cannot read $bin: not an ELF binary?"
! grep -q 'INTERP' <<<"$headers" || fail "the binary has an ELF interpreter (dynamically linked):
$(grep -A1 INTERP <<<"$headers")"
dynamic=$(readelf -dW "$bin") || fail "readelf -d failed on $bin"
! grep -q '(NEEDED)' <<<"$dynamic" || fail "the binary needs shared libraries:
$(grep '(NEEDED)' <<<"$dynamic")"
sections=$(readelf -SW "$bin") || fail "readelf -S failed on $bin"
! grep -qE '[[:space:]]\.symtab[[:space:]]' <<<"$sections" || fail "the binary has a symbol table: -s did not apply"
ok "statically linked (CGO_ENABLED=0, no INTERP, no NEEDED), stripped, -trimpath"

# --- the version stamp ------------------------------------------------------------------------------------------------
# In an empty directory with an almost empty environment, as in the distroless image: `version` needs no config.
out=$(cd "$tmp" && timeout 10 env -i HOME=/nonexistent PATH=/nonexistent "$bin" version 2>&1) ||
	fail "'jobsched version' exited non-zero: $out"
grep -qF -- "$VERSION" <<<"$out" || fail "'jobsched version' printed '$out', not the stamped version $VERSION"
ok "'jobsched version' prints $VERSION"

echo "check-image-build: PASS" >&2
