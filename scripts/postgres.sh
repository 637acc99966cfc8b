#!/usr/bin/env bash
# A throwaway PostgreSQL server for jobsched's tests, run from the machine's installed server binaries
# (/usr/lib/postgresql/*/bin; installed with apt-get when missing) on 127.0.0.1 and a free port.
#
# Usage: scripts/postgres.sh up | down | dsn
#   up    start it (or reuse the running one); the last stdout line is the DSN:
#         postgres://postgres:postgres@127.0.0.1:PORT/postgres?sslmode=disable
#   dsn   print the DSN (exit 1 if it is not running)
#   down  stop it (pg_ctl stop -m fast) and remove its directory
#
# TCP connections use password authentication (scram-sha-256; user postgres, password postgres), so a wrong
# password really fails; the unix socket (in the run directory) trusts local connections.
#
# Environment:
#   JOBSCHED_CACHE   cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/jobsched)
#   JOBSCHED_PG_DIR  state directory (default $JOBSCHED_CACHE/postgres)
#
# initdb and postgres refuse to run as root, so when run as root they run as the `postgres` user, on a directory
# that user owns. If that user cannot reach the state directory (e.g. it is under root's 0700 home), the server's
# files (data, socket, log) go to a private directory under /tmp whose path is recorded in $JOBSCHED_PG_DIR/rundir;
# `down` removes both.
set -euo pipefail

CACHE=${JOBSCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/jobsched}
readonly CACHE
STATE=${JOBSCHED_PG_DIR:-$CACHE/postgres}
readonly STATE
readonly PG_USER=postgres PG_PASSWORD=postgres
readonly NAME=postgres
# shellcheck source=lib/daemon.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/daemon.sh"

# as_pg CMD...: run as the postgres OS user when we are root (the server refuses root), else as ourselves.
as_pg() {
	if ((EUID == 0)); then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

# find_pgbin: the newest installed server's bin directory; installs the distribution's server when there is none.
find_pgbin() {
	local bin
	bin=$(find_installed_pgbin)
	if [[ -z $bin ]]; then
		((EUID == 0)) || die "no PostgreSQL server in /usr/lib/postgresql/*/bin; install the postgresql package"
		log "no PostgreSQL server installed; installing it with apt-get"
		apt-get update >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql >&2
		bin=$(find_installed_pgbin)
		[[ -n $bin ]] || die "apt-get install postgresql did not install /usr/lib/postgresql/*/bin"
	fi
	echo "$bin"
}

find_installed_pgbin() {
	local d
	# Version-sorted, newest last.
	for d in $(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V); do
		[[ -x $d/initdb && -x $d/pg_ctl && -x $d/postgres ]] && echo "$d"
	done | tail -n 1
}

dsn_for() { echo "postgres://$PG_USER:$PG_PASSWORD@127.0.0.1:$1/postgres?sslmode=disable"; }

# rundir: where the server's own files live (see the header).
rundir() { cat "$STATE/rundir" 2>/dev/null; }

# running: the recorded server answers on its port.
running() {
	local run port pgbin
	run=$(rundir) || return 1
	port=$(cat "$STATE/port" 2>/dev/null) || return 1
	pgbin=$(find_installed_pgbin)
	[[ -n $pgbin && -f $run/data/postmaster.pid ]] || return 1
	as_pg "$pgbin/pg_ctl" -D "$run/data" status >/dev/null 2>&1 &&
		"$pgbin/pg_isready" -q -h 127.0.0.1 -p "$port" -t 3
}

# stop_server: pg_ctl stop -m fast; if that fails, end the recorded postmaster pid (TERM, then KILL).
stop_server() {
	local run pgbin pid
	run=$(rundir) || return 0
	[[ -f $run/data/postmaster.pid ]] || return 0
	pid=$(head -n 1 "$run/data/postmaster.pid")
	pgbin=$(find_installed_pgbin)
	if [[ -n $pgbin ]] && as_pg "$pgbin/pg_ctl" -D "$run/data" -m fast -t 30 stop >&2; then
		return 0
	fi
	if [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null &&
		[[ $(cat "/proc/$pid/comm" 2>/dev/null) == postgres ]]; then
		log "pg_ctl stop failed; terminating postmaster $pid"
		terminate "$pid"
	fi
}

remove_state() {
	local run
	run=$(rundir || true)
	if [[ -n $run && $run != "$STATE"/* ]]; then
		rm -rf "$run"
	fi
	rm -rf "$STATE"
}

cmd_up() {
	local pgbin run port pwfile
	pgbin=$(find_pgbin)
	lock 120

	if running; then
		log "already running (state in $STATE)"
		dsn_for "$(cat "$STATE/port")"
		return 0
	fi
	if [[ -e $STATE ]]; then
		# Throwaway data: a server that is not running (crash, reboot) is recreated rather than repaired.
		log "cleaning stale state in $STATE"
		stop_server || true
		remove_state
	fi
	mkdir -p "$STATE"

	# The server's files must be reachable by the postgres user (see the header).
	run=$STATE/run
	if ((EUID == 0)) && ! runuser -u postgres -- test -x "$STATE"; then
		run=$(mktemp -d /tmp/jobsched-pg.XXXXXX)
	fi
	mkdir -p "$run/sock"
	((EUID == 0)) && chown -R postgres: "$run"
	chmod 700 "$run"
	echo "$run" >"$STATE/rundir"

	pwfile=$run/pwfile
	(umask 077 && echo "$PG_PASSWORD" >"$pwfile")
	((EUID == 0)) && chown postgres: "$pwfile"
	log "initdb in $run/data ($pgbin)"
	# Password auth (scram-sha-256) on TCP, trust on the local socket: a wrong password must fail in tests.
	if ! as_pg "$pgbin/initdb" -D "$run/data" -U "$PG_USER" -A trust --auth-host=scram-sha-256 \
		--pwfile="$pwfile" -E UTF8 --no-locale >"$STATE/initdb.log" 2>&1; then
		tail -n 20 "$STATE/initdb.log" >&2
		die "initdb failed (log: $STATE/initdb.log)"
	fi
	rm -f "$pwfile"

	port=$(free_port)
	echo "$port" >"$STATE/port"
	log "starting postgres on 127.0.0.1:$port"
	# fsync off: throwaway test data.
	# 9>&-: the server must not inherit the lock's descriptor, or it would hold the lock for its whole life.
	if ! as_pg "$pgbin/pg_ctl" -D "$run/data" -l "$run/postgres.log" -w -t 60 \
		-o "-p $port -k $run/sock -c listen_addresses=127.0.0.1 -c fsync=off" start >&2 9>&-; then
		tail -n 20 "$run/postgres.log" >&2 || true
		die "postgres did not start (log: $run/postgres.log)"
	fi
	ln -sfn "$run/postgres.log" "$STATE/postgres.log"
	dsn_for "$port" >"$STATE/dsn"
	log "up; log: $run/postgres.log"
	dsn_for "$port"
}

cmd_down() {
	lock 120
	if [[ ! -e $STATE ]]; then
		log "not running (no $STATE)"
	else
		stop_server
		remove_state
		log "stopped and removed $STATE"
	fi
	rm -f "$STATE.lock"
}

cmd_dsn() {
	running || die "not running (run: $0 up)"
	dsn_for "$(cat "$STATE/port")"
}

case ${1:-} in
up) cmd_up ;;
down) cmd_down ;;
dsn) cmd_dsn ;;
*)
	echo "usage: $0 up|down|dsn" >&2
	exit 2
	;;
esac
