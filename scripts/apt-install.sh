#!/usr/bin/env bash
# Installs Debian packages: `apt-get install -y PKG...`, after `apt-get update` when the package
# lists are missing (a fresh container ships none, and every install then fails with "Unable
# to locate package") or older than 6 hours (a mirror drops superseded versions). So within one
# run of the test command the lists are fetched at most once, and only when something must be
# installed. Needs root. Usage: scripts/apt-install.sh PKG...
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 PKG..." >&2; exit 2; }
lists=/var/lib/apt/lists
stamp=$lists/.dlport-updated   # when this script last updated the lists
if [ -z "$(find "$lists" -maxdepth 1 -name '*_Packages*' 2>/dev/null | head -n 1)" ] \
  || [ -z "$(find "$stamp" -mmin -360 2>/dev/null)" ]; then
  echo "[install] apt-get update (the package lists are missing or older than 6 hours; about 10 s)"
  apt-get update -q >/dev/null
  touch "$stamp"
fi
echo "[install] apt-get install $* (Debian packages; seconds to a minute each)"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null
