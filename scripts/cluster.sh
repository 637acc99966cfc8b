#!/usr/bin/env bash
# A real, local Kubernetes control plane for jobsched's tests: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler built from source (no container engine or release download is available), plus kwok for fake
# nodes and a pod lifecycle (scripts/kwok/stages.yaml). Everything listens on 127.0.0.1 on free ports.
# With KUEUE=1 it also runs Kueue's manager (sigs.k8s.io/kueue, built from scripts/kueue) against it; with
# KARPENTER=1 Karpenter with its KWOK cloud provider (sigs.k8s.io/karpenter/kwok), whose nodes kwok runs.
#
# Usage: scripts/cluster.sh up | down | kubeconfig | status | kill COMPONENT | start kube-apiserver | build
#   up          build once (cached), start everything, create fake nodes; last stdout line = kubeconfig path.
#               Safe to run again: a healthy cluster is reused (and its kwok-node-* count reconciled).
#   down        stop exactly the processes `up` started and remove the state directory.
#   kubeconfig  print the kubeconfig path (exit 1 if the cluster is not up).
#   status      say what runs (exit 0 if everything is up, 1 otherwise).
#   kill C      SIGKILL one component (etcd, kube-apiserver, …, kueue, karpenter): a crash, for fault tests.
#   start C     start kube-apiserver again after `kill`, with the arguments `up` gave it; waits until it is ready.
#   build       only build (and cache) what `up` runs, Kueue too with KUEUE=1, Karpenter with KARPENTER=1;
#               starts nothing.
#
# Environment:
#   JOBSCHED_CACHE        cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/jobsched); binaries are kept in
#                         $JOBSCHED_CACHE/k8s-v1.37.2/ and $JOBSCHED_CACHE/kwok-v0.8.0/
#   JOBSCHED_CLUSTER_DIR  state directory: data, certs, logs, pids, kubeconfig (default $JOBSCHED_CACHE/cluster)
#   NODES                 number of fake nodes kwok-node-0..N-1 (default 1; 0: no worker node, e.g. for Karpenter)
#   NODE_CPU NODE_MEM NODE_PODS   capacity and allocatable of each fake node (default 4, 8Gi, 110)
#   JOBSCHED_AUDIT        1: the API server writes an audit log of every request on Jobs to $STATE/logs/audit.log
#   KCM_ARGS SCHEDULER_ARGS  more flags for kube-controller-manager and kube-scheduler (split on spaces), e.g. a big
#                         cluster's client QPS and Job syncs: KCM_ARGS='--kube-api-qps 400 --concurrent-job-syncs 50'
#                         (their defaults, 20 and 5, cap the Jobs run to completion at a few per second)
#   KWOK_ARGS             more flags for kwok, e.g. --config FILE with a KwokConfiguration whose
#                         options.podPlayStageParallelism is above its default of 4 pod changes at once
#   KUEUE                 1: also build (cached in $JOBSCHED_CACHE/kueue-v0.19.2/) and start Kueue's manager: its
#                         CRDs, its webhooks (served on 127.0.0.1, certificates made here) and the batch/job
#                         integration; `up` returns once its webhooks answer. Unset: no Kueue is built or started
#                         (a Kueue that an earlier KUEUE=1 `up` started is left running; `down` stops it).
#   KARPENTER             1: also build (cached in $JOBSCHED_CACHE/karpenter-v1.13.0/) and start Karpenter's KWOK
#                         provider out of cluster: its CRDs (NodePool, NodeClaim, NodeOverlay, KWOKNodeClass), no
#                         leader election, namespace karpenter, log $STATE/logs/karpenter.log. Its nodes carry
#                         kwok.x-k8s.io/node: fake, so kwok makes them Ready and runs their pods. No NodePool is made:
#                         scripts/karpenter/nodepool.yaml is one. Unset: as for KUEUE.
#
# Progress goes to stderr; stdout carries only results, so `KUBECONFIG=$(scripts/cluster.sh up | tail -n1)` works.
set -euo pipefail

readonly K8S_VERSION=v1.37.2
readonly KWOK_VERSION=v0.8.0
readonly KUEUE_VERSION=v0.19.2
readonly KARPENTER_VERSION=v1.13.0
readonly COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
# Components started only on request (KUEUE=1, KARPENTER=1), so not part of "the cluster is running".
readonly OPTIONAL_COMPONENTS=(kueue karpenter)

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly SCRIPT_DIR
CACHE=${JOBSCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/jobsched}
readonly CACHE
readonly K8S_BIN=$CACHE/k8s-$K8S_VERSION
readonly KWOK_BIN=$CACHE/kwok-$KWOK_VERSION
readonly KUEUE_BIN=$CACHE/kueue-$KUEUE_VERSION
readonly KARPENTER_BIN=$CACHE/karpenter-$KARPENTER_VERSION
STATE=${JOBSCHED_CLUSTER_DIR:-$CACHE/cluster}
readonly STATE
readonly KUBECONFIG_FILE=$STATE/kubeconfig

NODES=${NODES:-1}
KUEUE=${KUEUE:-}
KARPENTER=${KARPENTER:-}
NODE_CPU=${NODE_CPU:-4}
NODE_MEM=${NODE_MEM:-8Gi}
NODE_PODS=${NODE_PODS:-110}

log() { printf '[cluster] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# binary_of COMPONENT: the cached binary a component runs.
binary_of() {
	case $1 in
	kwok) echo "$KWOK_BIN/kwok" ;;
	kueue) echo "$KUEUE_BIN/kueue" ;;
	karpenter) echo "$KARPENTER_BIN/karpenter-kwok" ;;
	*) echo "$K8S_BIN/$1" ;;
	esac
}

# ---------------------------------------------------------------------------------------------------------------
# Building. Binaries are build outputs: cached outside the repository, keyed by version, never committed.

# run_with_progress LABEL LOGFILE CMD...: runs CMD with output to LOGFILE and prints a line every 30 s, because a
# cold Kubernetes build is silent for ~12 minutes and would otherwise look hung.
run_with_progress() {
	local label=$1 logfile=$2 start pid rc=0 last
	shift 2
	start=$SECONDS
	last=$SECONDS
	"$@" >"$logfile" 2>&1 &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		sleep 1
		if ((SECONDS - last >= 30)); then
			last=$SECONDS
			log "  ... still building $label ($((SECONDS - start))s elapsed, log: $logfile)"
		fi
	done
	wait "$pid" || rc=$?
	if ((rc != 0)); then
		log "building $label failed (exit $rc); last lines of $logfile:"
		tail -n 30 "$logfile" >&2 || true
		return "$rc"
	fi
	log "  built $label in $((SECONDS - start))s"
}

# build_k8s: etcd and the three control-plane binaries from the tools module in scripts/k8s. Output goes to a
# temporary directory first and is moved into place only after success, so an interrupted build never leaves a
# half-written binary that a later run would trust.
build_k8s() {
	local need=0 c tmp
	for c in etcd kube-apiserver kube-controller-manager kube-scheduler; do
		[[ -x $K8S_BIN/$c ]] || need=1
	done
	((need)) || return 0
	mkdir -p "$K8S_BIN"
	tmp=$(mktemp -d "$CACHE/.build-k8s.XXXXXX")
	# shellcheck disable=SC2064 # expand $tmp now: it is local to this function.
	trap "rm -rf '$tmp'; trap - RETURN" RETURN
	if [[ ! -x $K8S_BIN/etcd ]]; then
		log "building etcd (go.etcd.io/etcd/server/v3, ~20 s) into $K8S_BIN"
		(cd "$SCRIPT_DIR/k8s" && run_with_progress etcd "$tmp/etcd.log" \
			env GOWORK=off go build -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
		mv -f "$tmp/etcd" "$K8S_BIN/etcd"
	fi
	need=0
	for c in kube-apiserver kube-controller-manager kube-scheduler; do
		[[ -x $K8S_BIN/$c ]] || need=1
	done
	if ((need)); then
		log "building kube-apiserver, kube-controller-manager, kube-scheduler $K8S_VERSION into $K8S_BIN"
		log "  (the first build takes ~12 min on 2 cores; later ones seconds, from the Go build cache)"
		local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION"
		ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
		ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
		mkdir -p "$tmp/out"
		(cd "$SCRIPT_DIR/k8s" && run_with_progress "kubernetes $K8S_VERSION" "$tmp/k8s.log" \
			env GOWORK=off go build -ldflags "$ldflags" -o "$tmp/out/" k8s.io/kubernetes/cmd/kube-apiserver \
			k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler)
		for c in kube-apiserver kube-controller-manager kube-scheduler; do
			mv -f "$tmp/out/$c" "$K8S_BIN/$c"
		done
	fi
}

# build_kwok: `go install pkg@version` from an empty temp dir, so that it runs in its own module context and not
# in jobsched's or the tools module's.
build_kwok() {
	[[ -x $KWOK_BIN/kwok ]] && return 0
	local tmp
	mkdir -p "$KWOK_BIN"
	tmp=$(mktemp -d "$CACHE/.build-kwok.XXXXXX")
	# shellcheck disable=SC2064 # expand $tmp now: it is local to this function.
	trap "rm -rf '$tmp'; trap - RETURN" RETURN
	log "building kwok $KWOK_VERSION into $KWOK_BIN (~3 min the first time)"
	mkdir -p "$tmp/work" "$tmp/bin"
	(cd "$tmp/work" && run_with_progress "kwok $KWOK_VERSION" "$tmp/kwok.log" \
		env GOWORK=off GOFLAGS='' GOBIN="$tmp/bin" go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION")
	mv -f "$tmp/bin/kwok" "$KWOK_BIN/kwok"
}

# build_kueue: Kueue's manager from the tools module in scripts/kueue (Kueue's own go.mod decides the Kubernetes
# libraries), plus the manifests `up` applies (CRDs, webhook configurations) copied out of the same module, so that
# `up` needs no Go once the cache is filled.
build_kueue() {
	[[ -x $KUEUE_BIN/kueue && -f $KUEUE_BIN/config/components/webhook/manifests.yaml ]] && return 0
	local tmp dir
	mkdir -p "$KUEUE_BIN"
	tmp=$(mktemp -d "$CACHE/.build-kueue.XXXXXX")
	# shellcheck disable=SC2064 # expand $tmp now: it is local to this function.
	trap "rm -rf '$tmp'; trap - RETURN" RETURN
	log "building kueue $KUEUE_VERSION (sigs.k8s.io/kueue/cmd/kueue) into $KUEUE_BIN (~10 min the first time)"
	(cd "$SCRIPT_DIR/kueue" && run_with_progress "kueue $KUEUE_VERSION" "$tmp/kueue.log" \
		env GOWORK=off go build -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION" \
		-o "$tmp/kueue" sigs.k8s.io/kueue/cmd/kueue)
	dir=$(cd "$SCRIPT_DIR/kueue" && GOWORK=off go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)
	[[ -d $dir/config/components/crd/bases ]] || die "no CRDs in the kueue module at $dir"
	mkdir -p "$tmp/config/components/crd" "$tmp/config/components/webhook"
	cp -r "$dir/config/components/crd/bases" "$tmp/config/components/crd/"
	cp "$dir/config/components/webhook/manifests.yaml" "$tmp/config/components/webhook/"
	chmod -R u+w "$tmp/config"
	rm -rf "$KUEUE_BIN/config"
	mv -f "$tmp/config" "$KUEUE_BIN/config"
	mv -f "$tmp/kueue" "$KUEUE_BIN/kueue"
}

# build_karpenter: Karpenter's KWOK provider (`go install sigs.k8s.io/karpenter/kwok@version` in its own module
# context, like kwok; the binary is named kwok, hence the rename), and its CRDs copied out of the same module, so
# that `up` needs no Go once the cache is filled.
build_karpenter() {
	[[ -x $KARPENTER_BIN/karpenter-kwok && -d $KARPENTER_BIN/crds ]] && return 0
	local tmp dir
	mkdir -p "$KARPENTER_BIN"
	tmp=$(mktemp -d "$CACHE/.build-karpenter.XXXXXX")
	# shellcheck disable=SC2064 # expand $tmp now: it is local to this function.
	trap "rm -rf '$tmp'; trap - RETURN" RETURN
	mkdir -p "$tmp/work" "$tmp/bin" "$tmp/crds"
	if [[ ! -x $KARPENTER_BIN/karpenter-kwok ]]; then
		log "building karpenter $KARPENTER_VERSION (sigs.k8s.io/karpenter/kwok) into $KARPENTER_BIN (~10 min the first time)"
		(cd "$tmp/work" && run_with_progress "karpenter $KARPENTER_VERSION" "$tmp/karpenter.log" \
			env GOWORK=off GOFLAGS='' GOBIN="$tmp/bin" go install "sigs.k8s.io/karpenter/kwok@$KARPENTER_VERSION")
		mv -f "$tmp/bin/kwok" "$KARPENTER_BIN/karpenter-kwok"
	fi
	dir=$(cd "$tmp/work" && GOWORK=off GOFLAGS='' go mod download -json "sigs.k8s.io/karpenter@$KARPENTER_VERSION" |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
	[[ -d $dir/kwok/charts/crds && -d $dir/kwok/apis/crds ]] || die "no CRDs in the karpenter module at $dir"
	cp "$dir"/kwok/charts/crds/*.yaml "$dir"/kwok/apis/crds/*.yaml "$tmp/crds/"
	chmod -R u+w "$tmp/crds"
	mv -f "$tmp/crds" "$KARPENTER_BIN/crds"
}

build_all() {
	command -v go >/dev/null || die "go is not on PATH (needed once, to build the control plane)"
	mkdir -p "$CACHE"
	# Two concurrent `up`s must not build the same thing twice.
	exec 8>"$CACHE/.build.lock"
	flock -w 1800 8 || die "another build has held $CACHE/.build.lock for 30 min"
	# Leftovers of an interrupted build (never trusted, only removed).
	rm -rf "$CACHE"/.build-k8s.* "$CACHE"/.build-kwok.* "$CACHE"/.build-kueue.* "$CACHE"/.build-karpenter.*
	build_k8s
	build_kwok
	if [[ $KUEUE == 1 ]]; then build_kueue; fi
	if [[ $KARPENTER == 1 ]]; then build_karpenter; fi
	flock -u 8
}

# ---------------------------------------------------------------------------------------------------------------
# Processes. Each component's pid is recorded in $STATE/pids/NAME.pid; a pid only counts as ours if it still runs
# the cached binary (guards against pid reuse after a reboot or a crash).

pid_of() {
	local f=$STATE/pids/$1.pid
	[[ -f $f ]] && cat "$f"
}

# is_ours COMPONENT PID: the process is alive and runs this component's binary.
is_ours() {
	local exe
	[[ -n $2 ]] && kill -0 "$2" 2>/dev/null || return 1
	exe=$(readlink "/proc/$2/exe" 2>/dev/null) || return 1
	[[ ${exe% (deleted)} == "$(binary_of "$1")" ]]
}

component_alive() {
	local pid
	pid=$(pid_of "$1") || return 1
	is_ours "$1" "$pid"
}

# start COMPONENT ARGS...: runs the binary detached (own session, stdin from /dev/null, output to its log) so it
# outlives this script, holds no pipe of the caller open, and is not hit by a signal to the caller's process group.
start() {
	local name=$1 bin
	shift
	bin=$(binary_of "$name")
	# 8>&- 9>&-: it must not inherit the lock descriptors, or it would hold the locks for its whole life.
	setsid "$bin" "$@" </dev/null >>"$STATE/logs/$name.log" 2>&1 8>&- 9>&- &
	local pid=$! i exe
	echo "$pid" >"$STATE/pids/$name.pid"
	# Until the child has exec'd, /proc/PID/exe is setsid's or bash's, and is_ours would take the component for
	# gone ("exited during startup", seen on a loaded machine): wait for the exec (or the process's end), 5 s at most.
	for ((i = 0; i < 100; i++)); do
		exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || break
		[[ ${exe% (deleted)} == "$bin" ]] && break
		sleep 0.05
	done
}

# stop COMPONENT...: TERM to each, wait up to 15 s for all, then KILL what is left; only ever the recorded pids,
# and only while they still run our binaries. The components of one call stop concurrently (each takes 1-3 s).
stop() {
	local name pid i pids=() left
	for name in "$@"; do
		pid=$(pid_of "$name") || continue
		if is_ours "$name" "$pid"; then
			kill -TERM "$pid" 2>/dev/null || true
			pids+=("$pid")
		fi
	done
	for ((i = 0; i < 200 && ${#pids[@]} > 0; i++)); do
		left=()
		for pid in "${pids[@]}"; do
			if kill -0 "$pid" 2>/dev/null; then left+=("$pid"); fi
		done
		pids=("${left[@]}")
		((${#pids[@]} == 0)) || sleep 0.1
		if ((i == 150)); then
			for pid in "${pids[@]}"; do
				log "pid $pid ignored TERM for 15s; killing it"
				kill -KILL "$pid" 2>/dev/null || true
			done
		fi
	done
	for name in "$@"; do
		rm -f "$STATE/pids/$name.pid"
	done
}

stop_all() {
	[[ -d $STATE/pids ]] || return 0
	# Clients first, then the apiserver, then etcd: nothing loses its server while it is still shutting down.
	stop karpenter kueue kwok kube-scheduler kube-controller-manager
	stop kube-apiserver
	stop etcd
}

# fail_component NAME MESSAGE: the clear error `up` ends with: what failed and the tail of its log. The processes
# already started are stopped (the logs stay in $STATE/logs for a look; the next `up` starts clean); a failing
# Kueue stops only Kueue.
fail_component() {
	log "ERROR: $2"
	if [[ -f $STATE/logs/$1.log ]]; then
		log "last lines of $STATE/logs/$1.log:"
		tail -n 25 "$STATE/logs/$1.log" >&2 || true
	fi
	if [[ $1 == karpenter ]]; then
		stop karpenter # only Karpenter: the cluster stays usable
	elif [[ $1 == kueue ]]; then
		# Only Kueue: the cluster stays usable, without webhooks that nothing answers.
		stop kueue
		kc delete mutatingwebhookconfiguration kueue-mutating-webhook-configuration --ignore-not-found >/dev/null 2>&1 || true
		kc delete validatingwebhookconfiguration kueue-validating-webhook-configuration --ignore-not-found >/dev/null 2>&1 || true
	else
		stop_all
	fi
	exit 1
}

# wait_for NAME TIMEOUT_SECONDS CMD...: polls CMD until it succeeds; fails with the component's log if the process
# died or the time ran out.
wait_for() {
	local name=$1 timeout=$2 deadline
	shift 2
	deadline=$((SECONDS + timeout))
	until "$@" >/dev/null 2>&1; do
		component_alive "$name" || fail_component "$name" "$name exited during startup"
		((SECONDS < deadline)) || fail_component "$name" "$name not ready after ${timeout}s"
		sleep 0.5
	done
}

# free_ports N: N distinct free TCP ports on 127.0.0.1, below the ephemeral range (scripts/lib/free_ports.py).
free_ports() { python3 "$SCRIPT_DIR/lib/free_ports.py" "$1"; }

# lock: one `up`/`down` at a time per state dir (the lock file sits next to it, since `down` removes the dir).
lock() {
	mkdir -p "$(dirname "$STATE")"
	exec 9>"$STATE.lock"
	flock -w 300 9 || die "another cluster.sh has held $STATE.lock for 300s"
}

kc() { kubectl --kubeconfig "$KUBECONFIG_FILE" "$@"; }

# https_ok URL: a TLS endpoint on 127.0.0.1 answers 200 (component serving certs are self-signed, hence -k).
https_ok() { curl -fsk --max-time 2 -o /dev/null "$1"; }

apiserver_ready() {
	[[ -f $STATE/ports.env ]] || return 1
	# shellcheck source=/dev/null
	source "$STATE/ports.env"
	curl -fs --max-time 3 --cacert "$STATE/certs/ca.crt" -H "Authorization: Bearer $(cat "$STATE/certs/admin.token")" \
		-o /dev/null "https://127.0.0.1:$APISERVER_PORT/readyz"
}

# cluster_running: every recorded process is ours and alive, and the apiserver is ready.
cluster_running() {
	local c
	for c in "${COMPONENTS[@]}"; do
		component_alive "$c" || return 1
	done
	apiserver_ready
}

# ---------------------------------------------------------------------------------------------------------------
# Setup.

# make_certs: a CA and a serving cert for 127.0.0.1 (so clients can verify TLS with the kubeconfig's CA instead of
# skipping verification), the service-account key pair (so `kubectl create token` and SA tokens work) and a random
# admin token in group system:masters.
make_certs() {
	local d=$STATE/certs
	mkdir -p "$d"
	openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=jobsched-local-ca" \
		-keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null
	openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" -keyout "$d/apiserver.key" \
		-out "$d/apiserver.csr" 2>/dev/null
	cat >"$d/apiserver.ext" <<'EOF'
basicConstraints=CA:FALSE
keyUsage=digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
EOF
	openssl x509 -req -in "$d/apiserver.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 3650 \
		-extfile "$d/apiserver.ext" -out "$d/apiserver.crt" 2>/dev/null
	openssl genrsa -out "$d/sa.key" 2048 2>/dev/null
	openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
	openssl rand -hex 24 >"$d/admin.token"
	printf '%s,admin,admin,"system:masters"\n' "$(cat "$d/admin.token")" >"$d/tokens.csv"
	chmod 600 "$d"/*.key "$d/admin.token" "$d/tokens.csv"
}

write_kubeconfig() {
	local ca token tmp
	ca=$(base64 -w0 <"$STATE/certs/ca.crt")
	token=$(cat "$STATE/certs/admin.token")
	tmp=$KUBECONFIG_FILE.tmp
	(
		umask 077
		cat >"$tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: jobsched-local
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $ca
users:
- name: admin
  user:
    token: $token
contexts:
- name: jobsched-local
  context:
    cluster: jobsched-local
    user: admin
    namespace: default
current-context: jobsched-local
EOF
	)
	mv -f "$tmp" "$KUBECONFIG_FILE"
}

# node_manifest I: a fake node kwok manages (selected by the annotation) with the configured size.
node_manifest() {
	cat <<EOF
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$1
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    type: kwok
    kubernetes.io/hostname: kwok-node-$1
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
spec: {}
status:
  allocatable:
    cpu: "$NODE_CPU"
    memory: "$NODE_MEM"
    pods: "$NODE_PODS"
  capacity:
    cpu: "$NODE_CPU"
    memory: "$NODE_MEM"
    pods: "$NODE_PODS"
EOF
}

# reconcile_nodes: exactly kwok-node-0..NODES-1 exist among the nodes this script makes (label type=kwok and the
# kwok-node- name); nodes that tests add under other names are left alone. Waits until all are Ready.
# The missing nodes go to the API server in one `kubectl create` (a call per node took minutes at a thousand), and
# readiness is one count of the Ready nodes per poll, not `kubectl wait` over all of them, whose --timeout is one
# budget for every object (40 nodes already took longer than it). The deadline grows with the count: kwok marks
# about a hundred nodes Ready per second here, and the first ones within a few seconds.
reconcile_nodes() {
	local i name existing missing=0 ready
	[[ $NODES =~ ^[0-9]+$ ]] || die "NODES must be a number, got '$NODES'"
	existing=$(kc get nodes -l type=kwok -o name 2>/dev/null || true)
	declare -A have=()
	for name in $existing; do have[$name]=1; done
	for ((i = 0; i < NODES; i++)); do
		[[ -n ${have[node/kwok-node-$i]:-} ]] && continue
		echo ---
		node_manifest "$i"
		missing=$((missing + 1))
	done >"$STATE/nodes.yaml"
	if ((missing > 0)); then
		log "creating $missing fake node(s)"
		kc create -f "$STATE/nodes.yaml" >/dev/null
	fi
	rm -f "$STATE/nodes.yaml"
	for name in $existing; do
		if [[ $name =~ ^node/kwok-node-([0-9]+)$ ]] && ((BASH_REMATCH[1] >= NODES)); then
			log "deleting surplus $name (NODES=$NODES)"
			kc delete "$name" --wait=false >/dev/null
		fi
	done
	((NODES > 0)) || return 0
	log "waiting for $NODES fake node(s) to be Ready"
	local limit=$((60 + NODES / 20)) deadline
	deadline=$((SECONDS + limit))
	while :; do
		ready=$(ready_nodes)
		((ready >= NODES)) && return 0
		component_alive kwok || fail_component kwok "kwok exited"
		((SECONDS < deadline)) || fail_component kwok "$ready of $NODES fake nodes Ready after ${limit}s"
		sleep 1
	done
}

# ready_nodes: how many of kwok-node-0..NODES-1 have condition Ready=True.
ready_nodes() {
	kc get nodes -l type=kwok -o jsonpath='{range .items[*]}{.metadata.name}{" "}{range .status.conditions[?(@.type=="Ready")]}{.status}{end}{"\n"}{end}' 2>/dev/null |
		awk -v n="$NODES" '$2 == "True" && match($1, /^kwok-node-[0-9]+$/) && substr($1, 11) + 0 < n { c++ } END { print c + 0 }'
}

# write_audit_policy: with JOBSCHED_AUDIT=1 the API server keeps an audit log of every request on Jobs (Metadata
# level: user, verb, namespace, name, URI, response code) in $STATE/logs/audit.log; the chaos test reads it.
write_audit_policy() {
	cat >"$STATE/audit-policy.yaml" <<'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  resources:
  - group: batch
    resources: [jobs]
- level: None
EOF
}

# start_apiserver: kube-apiserver on the ports of ports.env (used by `up` and by `start kube-apiserver`).
start_apiserver() {
	# shellcheck source=/dev/null
	source "$STATE/ports.env"
	local audit=()
	if [[ -f $STATE/audit-policy.yaml ]]; then
		audit=(--audit-policy-file "$STATE/audit-policy.yaml" --audit-log-path "$STATE/logs/audit.log"
			--audit-log-format json --audit-log-mode blocking)
	fi
	log "starting kube-apiserver on https://127.0.0.1:$APISERVER_PORT"
	# --endpoint-reconciler-type none: otherwise it exits because 127.0.0.1 "may not be in the loopback range".
	start kube-apiserver --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
		--bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$APISERVER_PORT" \
		--cert-dir "$STATE/certs" --tls-cert-file "$STATE/certs/apiserver.crt" \
		--tls-private-key-file "$STATE/certs/apiserver.key" \
		--endpoint-reconciler-type none --service-cluster-ip-range 10.96.0.0/16 \
		--authorization-mode Node,RBAC --token-auth-file "$STATE/certs/tokens.csv" \
		--service-account-issuer https://kubernetes.default.svc \
		--service-account-key-file "$STATE/certs/sa.pub" \
		--service-account-signing-key-file "$STATE/certs/sa.key" "${audit[@]}"
}

# ---------------------------------------------------------------------------------------------------------------
# Kueue (KUEUE=1). Its manager runs outside the cluster like the other components, so Kueue's own certificate
# management (a certificate for the in-cluster Service kueue-webhook-service.kueue-system.svc, patched into the
# webhook configurations) is off: the serving certificate for 127.0.0.1 is signed here by the cluster's CA, and each
# webhook's clientConfig.url points at 127.0.0.1 with that CA as its caBundle (scripts/kueue/manifests.py).

kueue_ready() {
	[[ -f $STATE/kueue/ports.env ]] || return 1
	# shellcheck source=/dev/null
	source "$STATE/kueue/ports.env"
	curl -fs --max-time 2 -o /dev/null "http://127.0.0.1:$KUEUE_HEALTH_PORT/readyz"
}

# kueue_webhooks_answer: the API server reaches Kueue's webhooks (a server-side dry run goes through them).
kueue_webhooks_answer() {
	kc create --dry-run=server -o name -f - <<'EOF'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: cluster-sh-webhook-probe
EOF
}

kueue_running() { component_alive kueue && kueue_ready; }

# make_kueue_certs: the webhook's serving certificate for 127.0.0.1, signed by the cluster's CA. The manager also
# insists on a metrics certificate at the fixed path /etc/kueue/metrics/certs when its own certificate management
# is off; that path is provided inside its own mount namespace (start_kueue), so nothing is written to /etc.
make_kueue_certs() {
	local d=$STATE/kueue/certs m=$STATE/kueue/etc-upper/kueue/metrics/certs
	mkdir -p "$d" "$m"
	openssl req -newkey rsa:2048 -nodes -subj "/CN=kueue-webhook" -keyout "$d/tls.key" -out "$d/tls.csr" 2>/dev/null
	cat >"$d/tls.ext" <<'EOF'
basicConstraints=CA:FALSE
keyUsage=digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost
EOF
	openssl x509 -req -in "$d/tls.csr" -CA "$STATE/certs/ca.crt" -CAkey "$STATE/certs/ca.key" -CAcreateserial \
		-days 3650 -extfile "$d/tls.ext" -out "$d/tls.crt" 2>/dev/null
	chmod 600 "$d/tls.key"
	cp -p "$d/tls.crt" "$d/tls.key" "$m/"
}

write_kueue_config() {
	cat >"$STATE/kueue/config.yaml" <<EOF
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health:
  healthProbeBindAddress: 127.0.0.1:$KUEUE_HEALTH_PORT
metrics:
  bindAddress: 127.0.0.1:$KUEUE_METRICS_PORT
webhook:
  host: 127.0.0.1
  port: $KUEUE_WEBHOOK_PORT
  certDir: $STATE/kueue/certs
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
clientConnection:
  qps: 300
  burst: 500
integrations:
  frameworks:
  - batch/job
featureGates:
  # The on-demand visibility API is an aggregated API server (a Service behind an APIService): not served here.
  VisibilityOnDemand: false
EOF
}

# start_kueue: the manager detached like `start`, in a mount namespace of its own where /etc is an overlay holding
# the metrics certificate at the path the manager hard-codes. unshare and sh exec into the manager, so the recorded
# pid is the manager's; this returns once that exec happened.
start_kueue() {
	mkdir -p "$STATE/kueue/etc-work"
	# shellcheck disable=SC2016 # $1.. are expanded by the inner sh.
	KUBECONFIG=$KUBECONFIG_FILE setsid unshare --mount sh -c \
		'mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1,workdir=$2" /etc && shift 2 && exec "$@"' \
		sh "$STATE/kueue/etc-upper" "$STATE/kueue/etc-work" "$KUEUE_BIN/kueue" --config "$STATE/kueue/config.yaml" \
		</dev/null >>"$STATE/logs/kueue.log" 2>&1 8>&- 9>&- &
	local pid=$! i
	echo "$pid" >"$STATE/pids/kueue.pid"
	for ((i = 0; i < 100; i++)); do
		is_ours kueue "$pid" && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	fail_component kueue "kueue did not start (are 'unshare --mount' and an overlay mount of /etc allowed here?)"
}

# up_kueue: Kueue on the running cluster (unless it already runs): CRDs, the manager, then its webhooks. The
# webhook configurations go in only once the manager is ready, since with failurePolicy Fail they would reject
# every Job and Kueue object until it answers. Returns once the API server reaches the webhooks.
up_kueue() {
	if kueue_running; then
		log "kueue already running"
		return 0
	fi
	stop kueue
	rm -rf "$STATE/kueue"
	mkdir -p "$STATE/kueue"
	local t0=$SECONDS KUEUE_WEBHOOK_PORT KUEUE_HEALTH_PORT KUEUE_METRICS_PORT
	read -r KUEUE_WEBHOOK_PORT KUEUE_HEALTH_PORT KUEUE_METRICS_PORT < <(free_ports 3)
	cat >"$STATE/kueue/ports.env" <<EOF
KUEUE_WEBHOOK_PORT=$KUEUE_WEBHOOK_PORT
KUEUE_HEALTH_PORT=$KUEUE_HEALTH_PORT
KUEUE_METRICS_PORT=$KUEUE_METRICS_PORT
EOF
	make_kueue_certs
	write_kueue_config
	python3 "$SCRIPT_DIR/kueue/manifests.py" "$KUEUE_BIN" "https://127.0.0.1:$KUEUE_WEBHOOK_PORT" \
		"$STATE/certs/ca.crt" "$STATE/kueue" || die "writing Kueue's manifests failed"
	log "applying Kueue $KUEUE_VERSION CRDs"
	# Server-side: the Workload CRD is larger than client-side apply's last-applied annotation allows.
	kc apply --server-side --force-conflicts --field-manager cluster-sh -f "$STATE/kueue/crds.yaml" >/dev/null
	kc wait --for=condition=Established --timeout=60s -f "$STATE/kueue/crds.yaml" >/dev/null
	kc get namespace kueue-system >/dev/null 2>&1 || kc create namespace kueue-system >/dev/null
	log "starting kueue (webhooks on https://127.0.0.1:$KUEUE_WEBHOOK_PORT)"
	start_kueue
	wait_for kueue 120 kueue_ready
	kc apply --server-side --force-conflicts --field-manager cluster-sh -f "$STATE/kueue/webhooks.yaml" >/dev/null
	wait_for kueue 60 kueue_webhooks_answer
	log "kueue ready after $((SECONDS - t0))s"
}

# ---------------------------------------------------------------------------------------------------------------
# Karpenter (KARPENTER=1): its KWOK cloud provider, out of cluster like the other components. It creates a Node per
# NodeClaim (annotated kwok.x-k8s.io/node: fake, so this cluster's kwok makes it Ready) and deletes it again.

karpenter_ready() {
	[[ -f $STATE/karpenter/ports.env ]] || return 1
	# shellcheck source=/dev/null
	source "$STATE/karpenter/ports.env"
	curl -fs --max-time 2 -o /dev/null "http://127.0.0.1:$KARPENTER_HEALTH_PORT/readyz"
}

karpenter_running() { component_alive karpenter && karpenter_ready; }

# up_karpenter: Karpenter on the running cluster (unless it already runs): its CRDs, its namespace, the manager.
# Returns once it is ready.
up_karpenter() {
	if karpenter_running; then
		log "karpenter already running"
		return 0
	fi
	stop karpenter
	rm -rf "$STATE/karpenter"
	mkdir -p "$STATE/karpenter"
	local t0=$SECONDS KARPENTER_METRICS_PORT KARPENTER_HEALTH_PORT
	read -r KARPENTER_METRICS_PORT KARPENTER_HEALTH_PORT < <(free_ports 2)
	cat >"$STATE/karpenter/ports.env" <<EOF
KARPENTER_METRICS_PORT=$KARPENTER_METRICS_PORT
KARPENTER_HEALTH_PORT=$KARPENTER_HEALTH_PORT
EOF
	log "applying Karpenter $KARPENTER_VERSION CRDs"
	kc apply --server-side --force-conflicts --field-manager cluster-sh -f "$KARPENTER_BIN/crds" >/dev/null
	kc wait --for=condition=Established --timeout=60s -f "$KARPENTER_BIN/crds" >/dev/null
	kc get namespace karpenter >/dev/null 2>&1 || kc create namespace karpenter >/dev/null
	log "starting karpenter (health on http://127.0.0.1:$KARPENTER_HEALTH_PORT)"
	KUBECONFIG=$KUBECONFIG_FILE DISABLE_LEADER_ELECTION=true SYSTEM_NAMESPACE=karpenter \
		METRICS_PORT=$KARPENTER_METRICS_PORT HEALTH_PROBE_PORT=$KARPENTER_HEALTH_PORT start karpenter
	wait_for karpenter 120 karpenter_ready
	log "karpenter ready after $((SECONDS - t0))s"
}

# cmd_kill COMPONENT: SIGKILL that one component (a crash, for fault tests); only its recorded pid, only while it
# runs our binary. Returns once it is gone.
cmd_kill() {
	local name=${1:-} pid i
	[[ " ${COMPONENTS[*]} ${OPTIONAL_COMPONENTS[*]} " == *" $name "* ]] ||
		die "kill: unknown component '$name' (one of: ${COMPONENTS[*]} ${OPTIONAL_COMPONENTS[*]})"
	pid=$(pid_of "$name") || die "kill: $name has no recorded pid"
	is_ours "$name" "$pid" || die "kill: $name (pid $pid) is not running"
	kill -KILL "$pid"
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	rm -f "$STATE/pids/$name.pid"
}

# cmd_start COMPONENT: start a component that `kill` stopped, with the arguments `up` gave it, and wait until it is
# ready. Only kube-apiserver for now.
cmd_start() {
	local name=${1:-}
	[[ $name == kube-apiserver ]] || die "start: only kube-apiserver can be started on its own, not '$name'"
	[[ -f $STATE/ports.env ]] || die "start: no cluster in $STATE (run: $0 up)"
	if component_alive kube-apiserver; then die "start: kube-apiserver is already running"; fi
	start_apiserver
	local deadline=$((SECONDS + 90))
	until apiserver_ready 2>/dev/null; do
		component_alive kube-apiserver || die "start: kube-apiserver exited; see $STATE/logs/kube-apiserver.log"
		((SECONDS < deadline)) || die "start: kube-apiserver not ready after 90s; see $STATE/logs/kube-apiserver.log"
		sleep 0.2
	done
}

print_kubeconfig() {
	echo "$KUBECONFIG_FILE"
}

cmd_up() {
	command -v kubectl >/dev/null || die "kubectl is not on PATH"
	command -v openssl >/dev/null || die "openssl is not on PATH"
	command -v python3 >/dev/null || die "python3 is not on PATH (used to pick free ports)"
	build_all

	lock

	if cluster_running; then
		log "cluster already running (state in $STATE)"
		reconcile_nodes
		if [[ $KUEUE == 1 ]]; then up_kueue; fi
		if [[ $KARPENTER == 1 ]]; then up_karpenter; fi
		print_kubeconfig
		return 0
	fi
	if [[ -e $STATE ]]; then
		log "cleaning stale state in $STATE"
		stop_all
		rm -rf "$STATE"
	fi
	mkdir -p "$STATE"/{data,certs,logs,pids}
	chmod 700 "$STATE"

	local t0=$SECONDS
	local ETCD_PORT ETCD_PEER_PORT APISERVER_PORT KCM_PORT SCHED_PORT KWOK_PORT
	read -r ETCD_PORT ETCD_PEER_PORT APISERVER_PORT KCM_PORT SCHED_PORT KWOK_PORT < <(free_ports 6)
	cat >"$STATE/ports.env" <<EOF
ETCD_PORT=$ETCD_PORT
ETCD_PEER_PORT=$ETCD_PEER_PORT
APISERVER_PORT=$APISERVER_PORT
KCM_PORT=$KCM_PORT
SCHED_PORT=$SCHED_PORT
KWOK_PORT=$KWOK_PORT
EOF
	make_certs
	cp "$SCRIPT_DIR/kwok/stages.yaml" "$STATE/stages.yaml"

	log "starting etcd on 127.0.0.1:$ETCD_PORT"
	# --unsafe-no-fsync: throwaway test data; fsync only slows the tests down.
	start etcd --name default --data-dir "$STATE/data/etcd" \
		--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster "default=http://127.0.0.1:$ETCD_PEER_PORT" --unsafe-no-fsync
	wait_for etcd 30 curl -fs --max-time 2 "http://127.0.0.1:$ETCD_PORT/health"

	if [[ ${JOBSCHED_AUDIT:-} == 1 ]]; then write_audit_policy; fi
	start_apiserver
	write_kubeconfig
	wait_for kube-apiserver 90 apiserver_ready
	log "kube-apiserver ready after $((SECONDS - t0))s"

	log "starting kube-controller-manager and kube-scheduler"
	# shellcheck disable=SC2086 # KCM_ARGS, SCHEDULER_ARGS: lists of flags
	start kube-controller-manager --kubeconfig "$KUBECONFIG_FILE" --leader-elect=false --controllers '*' \
		--service-account-private-key-file "$STATE/certs/sa.key" --root-ca-file "$STATE/certs/ca.crt" \
		--use-service-account-credentials=false --bind-address 127.0.0.1 --secure-port "$KCM_PORT" ${KCM_ARGS:-}
	# shellcheck disable=SC2086
	start kube-scheduler --kubeconfig "$KUBECONFIG_FILE" --leader-elect=false \
		--bind-address 127.0.0.1 --secure-port "$SCHED_PORT" ${SCHEDULER_ARGS:-}
	wait_for kube-controller-manager 60 https_ok "https://127.0.0.1:$KCM_PORT/healthz"
	wait_for kube-scheduler 60 https_ok "https://127.0.0.1:$SCHED_PORT/healthz"

	log "starting kwok"
	# shellcheck disable=SC2086
	start kwok --kubeconfig "$KUBECONFIG_FILE" --config "$STATE/stages.yaml" \
		--manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
		--server-address "127.0.0.1:$KWOK_PORT" --cidr 10.244.0.0/16 ${KWOK_ARGS:-}

	# Pods cannot be created in a namespace before the controller-manager has made its `default` ServiceAccount
	# (the ServiceAccount admission plugin rejects them), so that is part of "ready".
	log "waiting for the default ServiceAccount"
	wait_for kube-controller-manager 60 kc -n default get serviceaccount default
	component_alive kwok || fail_component kwok "kwok exited during startup"
	reconcile_nodes
	component_alive kwok || fail_component kwok "kwok exited during startup"
	if [[ $KUEUE == 1 ]]; then up_kueue; fi
	if [[ $KARPENTER == 1 ]]; then up_karpenter; fi
	log "cluster up in $((SECONDS - t0))s; export KUBECONFIG=$KUBECONFIG_FILE"
	print_kubeconfig
}

cmd_down() {
	lock
	if [[ ! -e $STATE ]]; then
		log "not running (no $STATE)"
		rm -f "$STATE.lock"
		return 0
	fi
	stop_all
	rm -rf "$STATE"
	rm -f "$STATE.lock"
	log "cluster stopped and $STATE removed"
}

cmd_kubeconfig() {
	if [[ -f $KUBECONFIG_FILE ]] && cluster_running; then
		print_kubeconfig
	else
		die "cluster is not up (run: $0 up)"
	fi
}

cmd_status() {
	local c pid ok=0
	if [[ ! -d $STATE ]]; then
		echo "cluster: not running (no $STATE)"
		return 1
	fi
	echo "state: $STATE"
	for c in "${COMPONENTS[@]}"; do
		pid=$(pid_of "$c" || true)
		if component_alive "$c"; then
			echo "$c: running (pid $pid)"
		else
			echo "$c: NOT running${pid:+ (recorded pid $pid)}"
			ok=1
		fi
	done
	if [[ -f $STATE/ports.env ]]; then
		# shellcheck source=/dev/null
		source "$STATE/ports.env"
		echo "ports: etcd $ETCD_PORT, apiserver $APISERVER_PORT, controller-manager $KCM_PORT, scheduler $SCHED_PORT, kwok $KWOK_PORT"
	fi
	if [[ $KUEUE == 1 || -f $STATE/pids/kueue.pid ]]; then
		if kueue_running; then
			echo "kueue: running (pid $(pid_of kueue), webhooks on https://127.0.0.1:$KUEUE_WEBHOOK_PORT)"
		else
			echo "kueue: NOT running"
			ok=1
		fi
	fi
	if [[ $KARPENTER == 1 || -f $STATE/pids/karpenter.pid ]]; then
		if karpenter_running; then
			echo "karpenter: running (pid $(pid_of karpenter), health on http://127.0.0.1:$KARPENTER_HEALTH_PORT)"
		else
			echo "karpenter: NOT running"
			ok=1
		fi
	fi
	if apiserver_ready; then
		echo "apiserver: ready (https://127.0.0.1:$APISERVER_PORT)"
		echo "kubeconfig: $KUBECONFIG_FILE"
		kc get nodes -o wide 2>/dev/null || true
	else
		echo "apiserver: not ready"
		ok=1
	fi
	return "$ok"
}

main() {
	case ${1:-} in
	up) cmd_up ;;
	down) cmd_down ;;
	kubeconfig) cmd_kubeconfig ;;
	status) cmd_status ;;
	kill) cmd_kill "${2:-}" ;;
	start) cmd_start "${2:-}" ;;
	build) build_all ;;
	*)
		echo "usage: $0 up|down|kubeconfig|status|kill COMPONENT|start kube-apiserver|build" >&2
		exit 2
		;;
	esac
}

main "$@"
