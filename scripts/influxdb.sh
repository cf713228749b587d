#!/usr/bin/env bash
# Starts and stops a throw-away InfluxDB 1.8.10 server for tests and demos.
#
#   scripts/influxdb.sh install      install influxd 1.8.10 with `go install` if it is missing; print its path
#   scripts/influxdb.sh start DIR    start influxd on free loopback ports with its data, config, log and pid in DIR;
#                                    print the server's URL and write DIR/env (INFLUX_URL=..., INFLUXD=...)
#   scripts/influxdb.sh stop DIR     stop the server started in DIR (SIGTERM, then SIGKILL after 10 s)
#
# Environment: INFLUXD names the binary (default: influxd on PATH, else $(go env GOPATH)/bin/influxd);
# INFLUXDB_AUTH=true starts the server with authentication on (and no users), as a locked-down server is.
# Flux and the /api/v2 compatibility endpoints (which influxdb-client-go/v2 speaks) are enabled.
set -euo pipefail

influxd_version=v1.8.10

die() { echo "influxdb.sh: $*" >&2; exit 1; }

find_influxd() {
	if [[ -n "${INFLUXD:-}" ]]; then
		[[ -x "$INFLUXD" ]] || die "INFLUXD=$INFLUXD is not an executable"
		echo "$INFLUXD"; return
	fi
	if command -v influxd >/dev/null 2>&1; then command -v influxd; return; fi
	local gobin
	gobin="$(go env GOBIN)"; [[ -n "$gobin" ]] || gobin="$(go env GOPATH)/bin"
	echo "$gobin/influxd"
}

install() {
	local bin
	bin="$(find_influxd)"
	if [[ ! -x "$bin" ]]; then
		echo "influxdb.sh: installing influxd $influxd_version with go install (a few minutes the first time)" >&2
		go install "github.com/influxdata/influxdb/cmd/influxd@$influxd_version" >&2 ||
			die "go install github.com/influxdata/influxdb/cmd/influxd@$influxd_version failed"
	fi
	[[ -x "$bin" ]] || die "influxd not found at $bin after installing"
	echo "$bin"
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Ports are drawn below the kernel's ephemeral range (outgoing connections take their local ports from it, and
# a port one of them holds refuses a bind although nothing listens on it).
free_port() {
	local p lo=20000 hi=32768 first
	if read -r first _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null && ((first > lo + 1000)); then hi=$first; fi
	for _ in $(seq 1 100); do
		p=$((lo + RANDOM % (hi - lo)))
		if port_free "$p"; then echo "$p"; return; fi
	done
	die "no free loopback port found"
}

# start tries up to 5 times: a port found free may be taken before influxd binds it.
start() {
	local try
	for try in 1 2 3 4 5; do
		if start_once "$@"; then return; fi
		if ! grep -q "address already in use" "$1/influxd.log" 2>/dev/null || ((try == 5)); then
			cat "$1/influxd.log" >&2
			die "influxd exited at start-up (log above)"
		fi
		echo "influxdb.sh: a port was taken before influxd bound it; trying others" >&2
	done
}

start_once() {
	local dir="$1" bin http_port rpc_port auth="${INFLUXDB_AUTH:-false}"
	command -v curl >/dev/null 2>&1 || die "curl is needed to wait for the server (apt-get install curl)"
	bin="$(install)"
	mkdir -p "$dir/meta" "$dir/data" "$dir/wal"
	http_port="$(free_port)"
	rpc_port="$(free_port)"
	[[ "$rpc_port" != "$http_port" ]] || rpc_port=$((http_port + 1))
	cat >"$dir/influxdb.conf" <<CONF
reporting-disabled = true
bind-address = "127.0.0.1:$rpc_port"
[meta]
  dir = "$dir/meta"
[data]
  dir = "$dir/data"
  wal-dir = "$dir/wal"
  query-log-enabled = false
[monitor]
  store-enabled = false
[http]
  enabled = true
  bind-address = "127.0.0.1:$http_port"
  auth-enabled = $auth
  log-enabled = false
  flux-enabled = true
[logging]
  level = "warn"
CONF
	"$bin" run -config "$dir/influxdb.conf" >"$dir/influxd.log" 2>&1 &
	echo $! >"$dir/influxd.pid"
	local url="http://127.0.0.1:$http_port"
	for _ in $(seq 1 300); do
		if curl -fsS -o /dev/null "$url/ping" 2>/dev/null; then
			printf 'INFLUX_URL=%s\nINFLUXD=%s\n' "$url" "$bin" >"$dir/env"
			echo "$url"
			return
		fi
		kill -0 "$(cat "$dir/influxd.pid")" 2>/dev/null || { rm -f "$dir/influxd.pid"; return 1; }
		sleep 0.1
	done
	stop "$dir"
	die "influxd did not answer $url/ping within 30 s; its log: $dir/influxd.log"
}

stop() {
	local dir="$1" pid
	[[ -f "$dir/influxd.pid" ]] || return 0
	pid="$(cat "$dir/influxd.pid")"
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$dir/influxd.pid"
}

case "${1:-}" in
install) install ;;
start) [[ $# -eq 2 ]] || die "usage: $0 start DIR"; start "$2" ;;
stop) [[ $# -eq 2 ]] || die "usage: $0 stop DIR"; stop "$2" ;;
*) die "usage: $0 install | start DIR | stop DIR" ;;
esac
