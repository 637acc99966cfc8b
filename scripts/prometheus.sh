#!/usr/bin/env bash
# A throwaway Prometheus for jobsched's monitoring tests: Debian's prometheus (installed with apt-get when missing,
# which also brings promtool), on 127.0.0.1 and a free port, scraping the Pushgateway every second with
# honor_labels: true and evaluating the rule files in its rules directory every second. Never a second copy: `up`
# reuses the one that runs (and points it at the Pushgateway given, when that moved).
#
# Usage: scripts/prometheus.sh up | down | url | rules-dir | promtool
#   up         start it (or reuse the running one); the last stdout line is its URL, http://127.0.0.1:PORT.
#              It scrapes $JOBSCHED_PROM_PUSHGATEWAY (default: the URL of scripts/pushgateway.sh url) and starts
#              with manifests/monitoring/jobsched.rules.yaml in its rules directory.
#   url        print the URL (exit 1 if it is not running)
#   rules-dir  print the directory of its rule files (*.yaml): write one there, then POST URL/-/reload
#   promtool   print the path of promtool (installing the package when missing)
#   down       stop it and remove its directory
#
# Environment:
#   JOBSCHED_CACHE            cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/jobsched)
#   JOBSCHED_PROM_DIR         state directory (default $JOBSCHED_CACHE/prometheus)
#   JOBSCHED_PROM_PUSHGATEWAY the Pushgateway's URL, for up
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly SCRIPT_DIR
CACHE=${JOBSCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/jobsched}
readonly CACHE
STATE=${JOBSCHED_PROM_DIR:-$CACHE/prometheus}
readonly STATE

log() { printf '[prometheus] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# find_bin NAME: the installed binary; installs Debian's prometheus package when it is missing (apt-get update first
# only if the install fails, e.g. on a machine whose package lists are old or empty).
find_bin() {
	local bin
	bin=$(command -v "$1" || true)
	if [[ -z $bin ]]; then
		((EUID == 0)) || die "$1 is not installed; install the prometheus package"
		log "$1 is not installed; installing the prometheus package with apt-get"
		if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus >&2; then
			apt-get update >&2
			DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus >&2
		fi
		bin=$(command -v "$1" || true)
		[[ -n $bin ]] || die "apt-get install prometheus did not install $1"
	fi
	echo "$bin"
}

url_for() { echo "http://127.0.0.1:$1"; }

lock() {
	mkdir -p "$(dirname "$STATE")"
	exec 9>"$STATE.lock"
	flock -w 60 9 || die "another prometheus.sh has held $STATE.lock for 60s"
}

# ours: the recorded pid is alive and is a Prometheus (a reused pid is not ours).
ours() {
	local pid
	pid=$(cat "$STATE/pid" 2>/dev/null) || return 1
	[[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && [[ $(cat "/proc/$pid/comm" 2>/dev/null) == prometheus ]]
}

ready() { curl -fsS -o /dev/null --max-time 2 "$(url_for "$1")/-/ready" 2>/dev/null; }

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

# pushgateway_target: host:port of the Pushgateway to scrape.
pushgateway_target() {
	local url=${JOBSCHED_PROM_PUSHGATEWAY:-}
	if [[ -z $url ]]; then
		url=$("$SCRIPT_DIR/pushgateway.sh" url) || die "no Pushgateway to scrape: set JOBSCHED_PROM_PUSHGATEWAY or run scripts/pushgateway.sh up"
	fi
	url=${url#http://}
	echo "${url%%/*}"
}

# write_config TARGET: the Prometheus config; honor_labels keeps the job, namespace and scheduler labels jobsched
# pushed (without it they would become exported_job, exported_namespace).
write_config() {
	cat >"$STATE/prometheus.yml.new" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $STATE/rules/*.yaml
scrape_configs:
  - job_name: pushgateway
    honor_labels: true
    static_configs:
      - targets: ["$1"]
EOF
	mv -f "$STATE/prometheus.yml.new" "$STATE/prometheus.yml"
}

cmd_up() {
	local bin target port pid i
	bin=$(find_bin prometheus)
	target=$(pushgateway_target)
	lock
	if running; then
		port=$(cat "$STATE/port")
		if ! grep -qF "\"$target\"" "$STATE/prometheus.yml"; then
			log "the Pushgateway moved to $target: reloading"
			write_config "$target"
			curl -fsS -X POST "$(url_for "$port")/-/reload" >&2 || die "reloading the config failed (log: $STATE/prometheus.log)"
		fi
		log "already running (state in $STATE)"
		url_for "$port"
		return 0
	fi
	if [[ -e $STATE ]]; then
		log "cleaning stale state in $STATE"
		stop
		rm -rf "$STATE"
	fi
	mkdir -p "$STATE/rules" "$STATE/data"
	cp "$SCRIPT_DIR/../manifests/monitoring/jobsched.rules.yaml" "$STATE/rules/"
	write_config "$target"
	port=$(free_port)
	echo "$port" >"$STATE/port"
	log "starting $bin on 127.0.0.1:$port, scraping $target"
	# 9>&-: the server must not inherit the lock's descriptor, or it would hold the lock for its whole life.
	setsid "$bin" --config.file="$STATE/prometheus.yml" --storage.tsdb.path="$STATE/data" \
		--storage.tsdb.retention.time=1d --web.listen-address="127.0.0.1:$port" --web.enable-lifecycle \
		>"$STATE/prometheus.log" 2>&1 </dev/null 9>&- &
	pid=$!
	echo "$pid" >"$STATE/pid"
	for ((i = 0; i < 300; i++)); do
		if ready "$port"; then
			log "up; log: $STATE/prometheus.log"
			url_for "$port"
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	tail -n 20 "$STATE/prometheus.log" >&2 || true
	stop
	die "Prometheus did not become ready (log: $STATE/prometheus.log)"
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

cmd_rules_dir() {
	running || die "not running (run: $0 up)"
	echo "$STATE/rules"
}

case ${1:-} in
up) cmd_up ;;
down) cmd_down ;;
url) cmd_url ;;
rules-dir) cmd_rules_dir ;;
promtool) find_bin promtool ;;
*)
	echo "usage: $0 up|down|url|rules-dir|promtool" >&2
	exit 2
	;;
esac
