#!/usr/bin/env bash
# Runs every Go fuzz target of the repository (func FuzzXxx in pkg/**/*_test.go) for a given time each:
#
#   scripts/fuzz.sh            each target for 1m
#   scripts/fuzz.sh 10m        each target for 10 minutes
#   scripts/fuzz.sh 30s Job    only the targets whose name matches the regexp "Job"
#
# The seed corpora (f.Add and testdata/fuzz/<Target>/) run with every plain `go test`; this script searches beyond
# them. A failing input is written by Go to the package's testdata/fuzz/<Target>/: commit it with the fix, so it
# stays a regression test. PARALLEL (default 1, the machine is shared) sets the fuzzing workers.
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime=${1:-1m}
match=${2:-.}
parallel=${PARALLEL:-1}
log() { printf '[fuzz] %s\n' "$*" >&2; }

failed=()
ran=0
while IFS= read -r line; do
	file=${line%%:*}
	target=$(sed -E 's/^.*func (Fuzz[A-Za-z0-9_]*)\(.*/\1/' <<<"${line#*:}")
	[[ $target =~ $match ]] || continue
	pkg=./$(dirname "$file")
	log "$target in $pkg for $fuzztime"
	ran=$((ran + 1))
	if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -parallel "$parallel" "$pkg"; then
		failed+=("$target ($pkg)")
	fi
done < <(grep -rnE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' pkg cmd | sort)

if ((ran == 0)); then
	log "no fuzz target matches '$match'"
	exit 2
fi
if ((${#failed[@]} > 0)); then
	log "FAILED: ${failed[*]} (the failing inputs are in each package's testdata/fuzz/)"
	exit 1
fi
log "$ran target(s) ran for $fuzztime each: no failure"
