#!/usr/bin/env bash
# The project's Raft against etcd 3.4, side by side on loopback (see raft-vs-etcd.ts).
# Installs Debian's etcd-server (and etcd-client) when etcd is missing.
#   scripts/bench/raft-vs-etcd.sh [--duration-s 10] [--failovers 5] [--steady-s 60] [--only raft|etcd]
#     [--failover-mode kill|freeze] [--failover-only] [--raft-tick-ms 100]
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v etcd >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq etcd-server etcd-client
fi
# Debian's package starts a single-member etcd on the default ports; the benchmark uses its own
# ports, so that service is left alone.
etcd --version | sed -n 1p

exec node --import tsx scripts/bench/raft-vs-etcd.ts "$@"
