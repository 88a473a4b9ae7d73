#!/bin/bash
# Open MPI's remote-shell agent for emulated hosts (scripts/emulate-hosts.sh): where
# mpirun would run `ssh HOST COMMAND`, this runs COMMAND inside the host's network
# namespace. Like ssh, the command words are joined and given to a shell.
set -euo pipefail
host=$1
shift
read -r ns cores < <(awk -v h="$host" '$1 == h { print $2, $3 }' /run/distrain-emulated-hosts/map 2>/dev/null) || true
[ -n "$ns" ] || { echo "netns-agent: $host is not an emulated host" >&2; exit 255; }
# Each host its own Open MPI session folder: the hosts share a hostname and /tmp, and
# two daemons writing one hwloc topology file (or shared-memory segments) crash.
mkdir -p "/tmp/$ns"
# The host's own cores (emulate-hosts.sh CORES): its daemon and ranks inherit them.
pin=()
[ -n "$cores" ] && [ "$cores" != all ] && pin=(taskset -c "$cores")
exec ip netns exec "$ns" "${pin[@]}" env OMPI_MCA_orte_tmpdir_base="/tmp/$ns" /bin/sh -c "$*"
