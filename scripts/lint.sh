#!/usr/bin/env bash
# golangci-lint with the repository's .golangci.yaml, on the `integration` build tag (the end-to-end and PostgreSQL
# tests): no file is `!integration`, so that build holds every file of the default one (scripts/test.sh's `go vet ./...`
# checks that the default build compiles). No release download is available, so golangci-lint is built once through the Go
# module proxy (`go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@VERSION`) and cached outside the
# repository, as scripts/helm.sh does for helm. scripts/test.sh runs it.
#
# Usage: scripts/lint.sh             lint the whole module (every file); exit non-zero on any finding
#        scripts/lint.sh path        build when missing; the last stdout line is the binary's path
#        scripts/lint.sh run ARGS... that golangci-lint's `run` with ARGS (e.g. scripts/lint.sh run ./pkg/rows/...)
#
# Environment:
#   JOBSCHED_CACHE   cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/jobsched); the binary is kept in
#                    $JOBSCHED_CACHE/golangci-lint-v2.15.0/golangci-lint
set -euo pipefail
cd "$(dirname "$0")/.."

readonly LINT_VERSION=v2.15.0
CACHE=${JOBSCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/jobsched}
readonly CACHE
readonly LINT_BIN=$CACHE/golangci-lint-$LINT_VERSION

log() { printf '[lint] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# build: `go install pkg@version` from an empty temp dir, in its own module context (not jobsched's, whose go.mod
# must not carry the linter's dependencies), into a temp GOBIN, then moved into place: an interrupted build never
# leaves a half-written binary in the cache.
build() {
	[[ -x $LINT_BIN/golangci-lint ]] && return 0
	command -v go >/dev/null || die "go is not on PATH (needed once, to build golangci-lint)"
	mkdir -p "$CACHE"
	exec 8>"$CACHE/.build-golangci-lint.lock"
	flock -w 1200 8 || die "another build has held $CACHE/.build-golangci-lint.lock for 20 min"
	if [[ -x $LINT_BIN/golangci-lint ]]; then
		flock -u 8
		return 0
	fi
	local tmp
	tmp=$(mktemp -d "$CACHE/.build-golangci-lint.XXXXXX")
	# shellcheck disable=SC2064 # expand $tmp now: it is local to this function.
	trap "rm -rf '$tmp'; trap - RETURN" RETURN
	log "building golangci-lint $LINT_VERSION into $LINT_BIN (about 10 minutes the first time on 2 cores)"
	mkdir -p "$tmp/work" "$tmp/bin" "$LINT_BIN"
	if ! (cd "$tmp/work" && env GOWORK=off GOFLAGS='' GOBIN="$tmp/bin" \
		go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$LINT_VERSION" >"$tmp/build.log" 2>&1); then
		tail -n 30 "$tmp/build.log" >&2
		die "building golangci-lint failed"
	fi
	mv -f "$tmp/bin/golangci-lint" "$LINT_BIN/golangci-lint"
	flock -u 8
}

case ${1:-} in
"")
	build
	log "golangci-lint $LINT_VERSION (-tags integration: every file)"
	"$LINT_BIN/golangci-lint" run --allow-serial-runners --build-tags integration ./...
	;;
path)
	build
	echo "$LINT_BIN/golangci-lint"
	;;
run)
	shift
	build
	exec "$LINT_BIN/golangci-lint" run "$@"
	;;
*)
	echo "usage: $0 [path | run ARGS...]" >&2
	exit 2
	;;
esac
