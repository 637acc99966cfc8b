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
PGSTATE=${JOBSCHED_PG_DIR:-$CACHE/postgres}
readonly PGSTATE
readonly PG_USER=postgres PG_PASSWORD=postgres

log() { printf '[postgres] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

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
rundir() { cat "$PGSTATE/rundir" 2>/dev/null; }

# lock: one up/down at a time per state dir (the lock file sits next to it, since `down` removes the dir).
lock() {
	mkdir -p "$(dirname "$PGSTATE")"
	exec 9>"$PGSTATE.lock"
	flock -w 120 9 || die "another postgres.sh has held $PGSTATE.lock for 120s"
}

# running: the recorded server answers on its port.
running() {
	local run port pgbin
	run=$(rundir) || return 1
	port=$(cat "$PGSTATE/port" 2>/dev/null) || return 1
	pgbin=$(find_installed_pgbin)
	[[ -n $pgbin && -f $run/data/postmaster.pid ]] || return 1
	as_pg "$pgbin/pg_ctl" -D "$run/data" status >/dev/null 2>&1 &&
		"$pgbin/pg_isready" -q -h 127.0.0.1 -p "$port" -t 3
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# stop_server: pg_ctl stop -m fast; if that fails, end the recorded postmaster pid (TERM, then KILL).
stop_server() {
	local run pgbin pid i
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
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < 100; i++)); do
			kill -0 "$pid" 2>/dev/null || return 0
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
}

remove_state() {
	local run
	run=$(rundir || true)
	if [[ -n $run && $run != "$PGSTATE"/* ]]; then
		rm -rf "$run"
	fi
	rm -rf "$PGSTATE"
}

cmd_up() {
	local pgbin run port pwfile
	pgbin=$(find_pgbin)
	lock

	if running; then
		log "already running (state in $PGSTATE)"
		dsn_for "$(cat "$PGSTATE/port")"
		return 0
	fi
	if [[ -e $PGSTATE ]]; then
		# Throwaway data: a server that is not running (crash, reboot) is recreated rather than repaired.
		log "cleaning stale state in $PGSTATE"
		stop_server || true
		remove_state
	fi
	mkdir -p "$PGSTATE"

	# The server's files must be reachable by the postgres user (see the header).
	run=$PGSTATE/run
	if ((EUID == 0)) && ! runuser -u postgres -- test -x "$PGSTATE"; then
		run=$(mktemp -d /tmp/jobsched-pg.XXXXXX)
	fi
	mkdir -p "$run/sock"
	((EUID == 0)) && chown -R postgres: "$run"
	chmod 700 "$run"
	echo "$run" >"$PGSTATE/rundir"

	pwfile=$run/pwfile
	(umask 077 && echo "$PG_PASSWORD" >"$pwfile")
	((EUID == 0)) && chown postgres: "$pwfile"
	log "initdb in $run/data ($pgbin)"
	# Password auth (scram-sha-256) on TCP, trust on the local socket: a wrong password must fail in tests.
	if ! as_pg "$pgbin/initdb" -D "$run/data" -U "$PG_USER" -A trust --auth-host=scram-sha-256 \
		--pwfile="$pwfile" -E UTF8 --no-locale >"$PGSTATE/initdb.log" 2>&1; then
		tail -n 20 "$PGSTATE/initdb.log" >&2
		die "initdb failed (log: $PGSTATE/initdb.log)"
	fi
	rm -f "$pwfile"

	port=$(free_port)
	echo "$port" >"$PGSTATE/port"
	log "starting postgres on 127.0.0.1:$port"
	# fsync off: throwaway test data.
	# 9>&-: the server must not inherit the lock's descriptor, or it would hold the lock for its whole life.
	if ! as_pg "$pgbin/pg_ctl" -D "$run/data" -l "$run/postgres.log" -w -t 60 \
		-o "-p $port -k $run/sock -c listen_addresses=127.0.0.1 -c fsync=off" start >&2 9>&-; then
		tail -n 20 "$run/postgres.log" >&2 || true
		die "postgres did not start (log: $run/postgres.log)"
	fi
	ln -sfn "$run/postgres.log" "$PGSTATE/postgres.log"
	dsn_for "$port" >"$PGSTATE/dsn"
	log "up; log: $run/postgres.log"
	dsn_for "$port"
}

cmd_down() {
	lock
	if [[ ! -e $PGSTATE ]]; then
		log "not running (no $PGSTATE)"
	else
		stop_server
		remove_state
		log "stopped and removed $PGSTATE"
	fi
	rm -f "$PGSTATE.lock"
}

cmd_dsn() {
	running || die "not running (run: $0 up)"
	dsn_for "$(cat "$PGSTATE/port")"
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
