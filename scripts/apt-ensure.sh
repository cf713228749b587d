#!/usr/bin/env bash
# Makes sure a program from a Debian package is installed, for the tests that run the real thing (Chromium for the
# browser tests, Prometheus for the metrics test). Downloads at test time fail in CI, so the tests use the
# distribution's packages, which the package registry serves.
#
#   scripts/apt-ensure.sh BIN PACKAGES VAR  print BIN; install PACKAGES (one or more, space-separated) with apt-get
#                                           first when BIN is missing
#                                           (needs root, or sudo without a password); VAR is the environment
#                                           variable that names another binary, for the advice
#
# Exits non-zero with a message saying what to do when BIN is missing and cannot be installed: the tests that need
# it then fail with the same advice rather than skip.
set -euo pipefail

[[ $# == 3 ]] || { echo "usage: $0 BIN PACKAGE VAR" >&2; exit 2; }
bin="$1" pkg="$2" var="$3"

die() { echo "apt-ensure.sh: $*" >&2; exit 1; }

if [[ -e "$bin" ]]; then
	echo "$bin"
	exit 0
fi

command -v apt-get >/dev/null 2>&1 ||
	die "$bin is missing and apt-get is not available: install $pkg from your distribution and set $var to its path"

sudo=()
if [[ "$(id -u)" != 0 ]]; then
	command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null ||
		die "$bin is missing and installing it needs root: run 'sudo apt-get install -y $pkg'"
	sudo=(sudo -n)
fi

echo "apt-ensure.sh: installing Debian's $pkg package (a few minutes the first time)" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q >&2 || die "apt-get update failed: is the Debian package registry reachable?"
"${sudo[@]}" apt-get install -y -q --no-install-recommends $pkg >&2 || die "apt-get install -y $pkg failed"
[[ -e "$bin" ]] || die "$pkg was installed but $bin is not there: set $var to its path"
echo "$bin"
