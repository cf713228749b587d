#!/usr/bin/env bash
# Makes sure Debian's Prometheus is installed for the metrics test (cmd/prescient's TestPrometheusScrapesTheDemo
# scrapes the demo with it and runs the Prometheus dashboard's queries) and prints its path.
# PRESCIENT_TEST_PROMETHEUS names the binary (default /usr/bin/prometheus, the path the test looks at).
set -euo pipefail
exec "$(dirname "$0")/apt-ensure.sh" "${PRESCIENT_TEST_PROMETHEUS:-/usr/bin/prometheus}" prometheus PRESCIENT_TEST_PROMETHEUS
