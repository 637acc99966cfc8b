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
readonly NAME=prometheus TITLE=Prometheus COMM=prometheus READY=/-/ready
# shellcheck source=lib/daemon.sh
source "$SCRIPT_DIR/lib/daemon.sh"

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
	local bin target port
	bin=$(apt_bin prometheus prometheus)
	target=$(pushgateway_target)
	lock
	if daemon_running; then
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
	daemon_clean
	mkdir -p "$STATE/rules" "$STATE/data"
	cp "$SCRIPT_DIR/../manifests/monitoring/jobsched.rules.yaml" "$STATE/rules/"
	write_config "$target"
	port=$(free_port)
	log "starting $bin on 127.0.0.1:$port, scraping $target"
	daemon_start "$port" 300 "$bin" --config.file="$STATE/prometheus.yml" --storage.tsdb.path="$STATE/data" \
		--storage.tsdb.retention.time=1d --web.listen-address="127.0.0.1:$port" --web.enable-lifecycle
}

cmd_rules_dir() {
	daemon_running || die "not running (run: $0 up)"
	echo "$STATE/rules"
}

case ${1:-} in
up) cmd_up ;;
down) daemon_down ;;
url) daemon_url ;;
rules-dir) cmd_rules_dir ;;
promtool) apt_bin promtool prometheus ;;
*)
	echo "usage: $0 up|down|url|rules-dir|promtool" >&2
	exit 2
	;;
esac
