#!/usr/bin/env bash
# A throwaway Prometheus Pushgateway for jobsched's tests: Debian's prometheus-pushgateway (installed with apt-get
# when missing), on 127.0.0.1 and a free port, with its own persistence file. Never a second copy: `up` reuses the
# one that runs.
#
# Usage: scripts/pushgateway.sh up | down | url
#   up    start it (or reuse the running one); the last stdout line is its URL, http://127.0.0.1:PORT
#   url   print the URL (exit 1 if it is not running)
#   down  stop it and remove its directory
#
# Environment:
#   JOBSCHED_CACHE   cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/jobsched)
#   JOBSCHED_PGW_DIR state directory (default $JOBSCHED_CACHE/pushgateway)
set -euo pipefail

CACHE=${JOBSCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/jobsched}
readonly CACHE
STATE=${JOBSCHED_PGW_DIR:-$CACHE/pushgateway}
readonly STATE
readonly BIN_NAME=prometheus-pushgateway

log() { printf '[pushgateway] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# find_bin: the installed Pushgateway; installs Debian's package when there is none (apt-get update first only if
# the install fails, e.g. on a machine whose package lists are old or empty).
find_bin() {
	local bin
	bin=$(command -v "$BIN_NAME" || true)
	if [[ -z $bin ]]; then
		((EUID == 0)) || die "$BIN_NAME is not installed; install the prometheus-pushgateway package"
		log "$BIN_NAME is not installed; installing it with apt-get"
		if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus-pushgateway >&2; then
			apt-get update >&2
			DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus-pushgateway >&2
		fi
		bin=$(command -v "$BIN_NAME" || true)
		[[ -n $bin ]] || die "apt-get install prometheus-pushgateway did not install $BIN_NAME"
	fi
	echo "$bin"
}

url_for() { echo "http://127.0.0.1:$1"; }

lock() {
	mkdir -p "$(dirname "$STATE")"
	exec 9>"$STATE.lock"
	flock -w 60 9 || die "another pushgateway.sh has held $STATE.lock for 60s"
}

# ours: the recorded pid is alive and is a Pushgateway (a reused pid is not ours).
ours() {
	local pid
	pid=$(cat "$STATE/pid" 2>/dev/null) || return 1
	[[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null &&
		[[ $(cat "/proc/$pid/comm" 2>/dev/null) == prometheus-push* ]]
}

ready() { curl -fsS -o /dev/null --max-time 2 "$(url_for "$1")/-/ready"; }

running() {
	local port
	port=$(cat "$STATE/port" 2>/dev/null) || return 1
	ours && ready "$port"
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

stop() {
	local pid i
	ours || return 0
	pid=$(cat "$STATE/pid")
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
}

cmd_up() {
	local bin port pid i
	bin=$(find_bin)
	lock
	if running; then
		log "already running (state in $STATE)"
		url_for "$(cat "$STATE/port")"
		return 0
	fi
	if [[ -e $STATE ]]; then
		log "cleaning stale state in $STATE"
		stop
		rm -rf "$STATE"
	fi
	mkdir -p "$STATE"
	port=$(free_port)
	echo "$port" >"$STATE/port"
	log "starting $bin on 127.0.0.1:$port"
	# 9>&-: the server must not inherit the lock's descriptor, or it would hold the lock for its whole life.
	setsid "$bin" --web.listen-address="127.0.0.1:$port" --persistence.file="$STATE/pushgateway.data" \
		--persistence.interval=1m >"$STATE/pushgateway.log" 2>&1 </dev/null 9>&- &
	pid=$!
	echo "$pid" >"$STATE/pid"
	for ((i = 0; i < 100; i++)); do
		if ready "$port"; then
			log "up; log: $STATE/pushgateway.log"
			url_for "$port"
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	tail -n 20 "$STATE/pushgateway.log" >&2 || true
	stop
	die "the Pushgateway did not become ready (log: $STATE/pushgateway.log)"
}

cmd_down() {
	lock
	if [[ ! -e $STATE ]]; then
		log "not running (no $STATE)"
	else
		stop
		rm -rf "$STATE"
		log "stopped and removed $STATE"
	fi
	rm -f "$STATE.lock"
}

cmd_url() {
	running || die "not running (run: $0 up)"
	url_for "$(cat "$STATE/port")"
}

case ${1:-} in
up) cmd_up ;;
down) cmd_down ;;
url) cmd_url ;;
*)
	echo "usage: $0 up|down|url" >&2
	exit 2
	;;
esac
