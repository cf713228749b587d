#!/usr/bin/env bash
# Makes sure Debian's Chromium is installed for the browser tests (internal/browsertest drives it headless through
# chromedp) and prints its path. CHROMIUM names the binary (default /usr/bin/chromium, the path the tests look at).
set -euo pipefail
exec "$(dirname "$0")/apt-ensure.sh" "${CHROMIUM:-/usr/bin/chromium}" chromium CHROMIUM
