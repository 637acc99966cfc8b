#!/usr/bin/env bash
# helm for jobsched's chart tests (manifests/chart): no release download is available, so it is built once through
# the Go module proxy (`go install helm.sh/helm/v3/cmd/helm@VERSION`) and cached outside the repository.
#
# Usage: scripts/helm.sh path        build when missing; the last stdout line is the binary's path
#        scripts/helm.sh ARGS...     run that helm with ARGS (e.g. scripts/helm.sh lint manifests/chart)
#
# Environment:
#   JOBSCHED_CACHE   cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/jobsched); the binary is kept in
#                    $JOBSCHED_CACHE/helm-v3.22.0/helm
set -euo pipefail

readonly HELM_VERSION=v3.22.0
CACHE=${JOBSCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/jobsched}
readonly CACHE
readonly HELM_BIN=$CACHE/helm-$HELM_VERSION

log() { printf '[helm] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# build: `go install pkg@version` from an empty temp dir, in its own module context (not jobsched's), into a temp
# GOBIN, then moved into place: an interrupted build never leaves a half-written binary in the cache.
build() {
	[[ -x $HELM_BIN/helm ]] && return 0
	command -v go >/dev/null || die "go is not on PATH (needed once, to build helm)"
	mkdir -p "$CACHE"
	exec 8>"$CACHE/.build-helm.lock"
	flock -w 900 8 || die "another build has held $CACHE/.build-helm.lock for 15 min"
	if [[ -x $HELM_BIN/helm ]]; then
		flock -u 8
		return 0
	fi
	local tmp
	tmp=$(mktemp -d "$CACHE/.build-helm.XXXXXX")
	# shellcheck disable=SC2064 # expand $tmp now: it is local to this function.
	trap "rm -rf '$tmp'; trap - RETURN" RETURN
	log "building helm $HELM_VERSION into $HELM_BIN (a few minutes the first time)"
	mkdir -p "$tmp/work" "$tmp/bin" "$HELM_BIN"
	# The stamps helm's Makefile sets: without them `helm version` says v3.22 and `helm template` assumes
	# Kubernetes v1.20 (which fails the chart's kubeVersion); 1.37 is the client-go helm v3.22.0 is built with.
	local ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
	local p
	for p in pkg/chartutil pkg/lint/rules; do
		ldflags+=" -X helm.sh/helm/v3/$p.k8sVersionMajor=1 -X helm.sh/helm/v3/$p.k8sVersionMinor=37"
	done
	if ! (cd "$tmp/work" && env GOWORK=off GOFLAGS='' GOBIN="$tmp/bin" CGO_ENABLED=0 \
		go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >"$tmp/build.log" 2>&1); then
		tail -n 30 "$tmp/build.log" >&2
		die "building helm failed"
	fi
	mv -f "$tmp/bin/helm" "$HELM_BIN/helm"
	flock -u 8
}

case ${1:-} in
"")
	echo "usage: $0 path | ARGS..." >&2
	exit 2
	;;
path)
	build
	echo "$HELM_BIN/helm"
	;;
*)
	build
	exec "$HELM_BIN/helm" "$@"
	;;
esac
