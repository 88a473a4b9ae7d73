#!/bin/bash
# Open MPI's remote-shell agent for emulated hosts (scripts/emulate-hosts.sh): where
# mpirun would run `ssh HOST COMMAND`, this runs COMMAND inside the host's network
# namespace. Like ssh, the command words are joined and given to a shell.
set -euo pipefail
host=$1
shift
ns=$(awk -v h="$host" '$1 == h { print $2 }' /run/distrain-emulated-hosts/map 2>/dev/null)
[ -n "$ns" ] || { echo "netns-agent: $host is not an emulated host" >&2; exit 255; }
exec ip netns exec "$ns" /bin/sh -c "$*"
