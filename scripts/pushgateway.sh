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
readonly NAME=pushgateway TITLE="the Pushgateway" COMM="prometheus-push*" READY=/-/ready
# shellcheck source=lib/daemon.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/daemon.sh"

cmd_up() {
	local bin port
	bin=$(apt_bin prometheus-pushgateway prometheus-pushgateway)
	lock
	if daemon_running; then
		log "already running (state in $STATE)"
		url_for "$(cat "$STATE/port")"
		return 0
	fi
	daemon_clean
	mkdir -p "$STATE"
	port=$(free_port)
	log "starting $bin on 127.0.0.1:$port"
	daemon_start "$port" 100 "$bin" --web.listen-address="127.0.0.1:$port" \
		--persistence.file="$STATE/pushgateway.data" --persistence.interval=1m
}

case ${1:-} in
up) cmd_up ;;
down) daemon_down ;;
url) daemon_url ;;
*)
	echo "usage: $0 up|down|url" >&2
	exit 2
	;;
esac
