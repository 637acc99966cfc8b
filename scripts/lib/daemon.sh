# shellcheck shell=bash
# Sourced (not run) by the scripts that start a throwaway local server: postgres.sh, pushgateway.sh, prometheus.sh.
# Before sourcing, the script sets:
#   NAME   the log prefix and the name in messages, e.g. pushgateway
#   STATE  the state directory (the lock file sits next to it, since `down` removes it)
# and, to use daemon_start, daemon_stop, daemon_running and daemon_down:
#   COMM   a glob that /proc/PID/comm of the server matches (a reused pid is not ours)
#   READY  the path that answers 200 once the server is ready, e.g. /-/ready
#   TITLE  (optional) how messages name the server, e.g. "the Pushgateway" (default: $NAME)
# The server's pid is in $STATE/pid and its port in $STATE/port.

log() { printf '[%s] %s\n' "$NAME" "$*" >&2; }
die() {
	log "ERROR: $*"
	exit 1
}

# lock [SECONDS]: one up/down at a time per state directory (default: wait 60 s for it).
lock() {
	local wait=${1:-60}
	mkdir -p "$(dirname "$STATE")"
	exec 9>"$STATE.lock"
	flock -w "$wait" 9 || die "another $(basename "$0") has held $STATE.lock for ${wait}s"
}

# free_port: a free TCP port on 127.0.0.1, below the ephemeral range (free_ports.py says why).
free_port() { python3 "$(dirname "${BASH_SOURCE[0]}")/free_ports.py" 1; }

url_for() { echo "http://127.0.0.1:$1"; }

# apt_bin BIN PACKAGE: the installed BIN; installs Debian's PACKAGE when it is missing (apt-get update first only if
# the install fails, e.g. on a machine whose package lists are old or empty).
apt_bin() {
	local bin
	bin=$(command -v "$1" || true)
	if [[ -z $bin ]]; then
		((EUID == 0)) || die "$1 is not installed; install the $2 package"
		log "$1 is not installed; installing the $2 package with apt-get"
		if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$2" >&2; then
			apt-get update >&2
			DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$2" >&2
		fi
		bin=$(command -v "$1" || true)
		[[ -n $bin ]] || die "apt-get install $2 did not install $1"
	fi
	echo "$bin"
}

# terminate PID: SIGTERM, up to 10 s for it to end, then SIGKILL.
terminate() {
	local i
	kill -TERM "$1" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -KILL "$1" 2>/dev/null || true
}

# daemon_ours: the recorded pid is alive and is our server.
daemon_ours() {
	local pid
	pid=$(cat "$STATE/pid" 2>/dev/null) || return 1
	# shellcheck disable=SC2053 # COMM is a glob
	[[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && [[ $(cat "/proc/$pid/comm" 2>/dev/null) == $COMM ]]
}

daemon_ready() { curl -fsS -o /dev/null --max-time 2 "$(url_for "$1")$READY" 2>/dev/null; }

# daemon_running: ours, and ready on the recorded port.
daemon_running() {
	local port
	port=$(cat "$STATE/port" 2>/dev/null) || return 1
	daemon_ours && daemon_ready "$port"
}

daemon_stop() {
	daemon_ours || return 0
	terminate "$(cat "$STATE/pid")"
}

# daemon_clean: removes the state of a server that is not running (crash, reboot): it is recreated, not repaired.
daemon_clean() {
	if [[ -e $STATE ]]; then
		log "cleaning stale state in $STATE"
		daemon_stop
		rm -rf "$STATE"
	fi
}

# daemon_start PORT TENTHS CMD...: starts CMD in its own session, its output in $STATE/$NAME.log, and waits up to
# TENTHS tenths of a second for it to be ready on PORT; prints its URL, or stops it and dies.
daemon_start() {
	local port=$1 tenths=$2 pid i
	shift 2
	echo "$port" >"$STATE/port"
	# 9>&-: the server must not inherit the lock's descriptor, or it would hold the lock for its whole life.
	setsid "$@" >"$STATE/$NAME.log" 2>&1 </dev/null 9>&- &
	pid=$!
	echo "$pid" >"$STATE/pid"
	for ((i = 0; i < tenths; i++)); do
		if daemon_ready "$port"; then
			log "up; log: $STATE/$NAME.log"
			url_for "$port"
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	tail -n 20 "$STATE/$NAME.log" >&2 || true
	daemon_stop
	die "${TITLE:-$NAME} did not become ready (log: $STATE/$NAME.log)"
}

# daemon_down: stops the server and removes its state directory and lock.
daemon_down() {
	lock
	if [[ ! -e $STATE ]]; then
		log "not running (no $STATE)"
	else
		daemon_stop
		rm -rf "$STATE"
		log "stopped and removed $STATE"
	fi
	rm -f "$STATE.lock"
}

# daemon_url: the URL of the running server, or dies.
daemon_url() {
	daemon_running || die "not running (run: $0 up)"
	url_for "$(cat "$STATE/port")"
}
