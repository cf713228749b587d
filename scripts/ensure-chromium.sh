#!/usr/bin/env bash
# Makes sure Debian's Chromium is installed for the browser tests (internal/browsertest drives it headless through
# chromedp). Browser downloads at test time fail in CI, so the tests use the distribution's package instead.
#
#   scripts/ensure-chromium.sh      print the browser's path; install the `chromium` package with apt-get first
#                                   when it is missing (needs root, or sudo without a password)
#
# Environment: CHROMIUM names the binary (default /usr/bin/chromium, the path the tests look at).
# Exits non-zero with a message saying what to do when the browser is missing and cannot be installed: the browser
# tests then fail with the same advice rather than skip.
set -euo pipefail

bin="${CHROMIUM:-/usr/bin/chromium}"

die() { echo "ensure-chromium.sh: $*" >&2; exit 1; }

if [[ -x "$bin" ]]; then
	echo "$bin"
	exit 0
fi

command -v apt-get >/dev/null 2>&1 ||
	die "$bin is missing and apt-get is not available: install Chromium from your distribution and set CHROMIUM to its path"

sudo=()
if [[ "$(id -u)" != 0 ]]; then
	command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null ||
		die "$bin is missing and installing it needs root: run 'sudo apt-get install -y chromium'"
	sudo=(sudo -n)
fi

echo "ensure-chromium.sh: installing Debian's chromium package (a few minutes the first time)" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q >&2 || die "apt-get update failed: is the Debian package registry reachable?"
"${sudo[@]}" apt-get install -y -q chromium >&2 || die "apt-get install -y chromium failed"
[[ -x "$bin" ]] || die "chromium was installed but $bin is not there: set CHROMIUM to the browser's path"
echo "$bin"
