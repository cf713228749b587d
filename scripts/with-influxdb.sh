#!/usr/bin/env bash
# Runs a command with a throw-away InfluxDB server: starts one in a temporary directory, exports
# PRESCIENT_TEST_INFLUX_URL (its address) and PRESCIENT_TEST_INFLUXD (the binary, for tests that must start and
# stop a server of their own), runs the command, and stops the server and removes its data whatever the outcome.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="$(mktemp -d "${TMPDIR:-/tmp}/prescient-influxdb.XXXXXX")"
cleanup() { "$here/influxdb.sh" stop "$dir" || true; rm -rf "$dir"; }
trap cleanup EXIT INT TERM
"$here/influxdb.sh" start "$dir" >/dev/null
# shellcheck disable=SC1091
source "$dir/env"
export PRESCIENT_TEST_INFLUX_URL="$INFLUX_URL" PRESCIENT_TEST_INFLUXD="$INFLUXD"
echo "with-influxdb.sh: InfluxDB 1.8.10 at $INFLUX_URL (data in $dir)" >&2
"$@"
