#!/bin/bash
# Emulated hosts on one machine: Linux network namespaces joined by veth pairs
# through a bridge, each host's link limited with tc htb (netem and tbf are not in
# every kernel; htb is). Open MPI runs ranks inside them over TCP through
# scripts/netns-agent.sh, its remote-shell agent.
#
#   scripts/emulate-hosts.sh up H [RATE]   H hosts, each link RATE (tc units: 10gbit,
#                                          100mbit; default unlimited), prints the hostfile;
#                                          each host its own CORES cores (default: this
#                                          machine's divided by H; 0: shared by all)
#   scripts/emulate-hosts.sh rate RATE     change every host's link rate
#   scripts/emulate-hosts.sh cut I         take host I's link down (a fault)
#   scripts/emulate-hosts.sh down          remove the hosts and the bridge
#   scripts/emulate-hosts.sh mpirun ARGS   mpirun across the hosts (hostfile, agent,
#                                          TCP on the emulated subnet)
#
# Host I is namespace dt-hostI with address 10.77.0.(I+1) on its eth0; the bridge
# dtbr0 (10.77.0.254) in the root namespace carries mpirun's control traffic. Ranks on one
# host talk over its loopback (TCP): shared memory (vader) names its files by hostname,
# which the namespaces share, so two hosts' segments would collide. A host's processes
# run on its own cores (taskset through the agent), as on separate machines: unpinned,
# a rank waiting for its host's peer may hold the core that peer needs.
# Needs root (CAP_NET_ADMIN); exits 77 with the reason where namespaces cannot be made.
set -euo pipefail

readonly kBridge=dtbr0
readonly kSubnet=10.77.0
readonly kPrefix=dt-host
readonly kState=/run/distrain-emulated-hosts
here=$(cd "$(dirname "$0")" && pwd)

die() { echo "emulate-hosts: $*" >&2; exit 2; }
unavailable() { echo "emulate-hosts: cannot emulate hosts here: $*" >&2; exit 77; }

host_count() { [ -f "$kState/hosts" ] && cat "$kState/hosts" || echo 0; }

# One htb class per direction of a host's link: egress of the host's eth0 (what it
# sends) and egress of its bridge port (what it receives).
shape() {  # shape NETNS_OR_EMPTY DEV RATE
    local ns=$1 dev=$2 rate=$3 run=()
    [ -n "$ns" ] && run=(ip netns exec "$ns")
    "${run[@]}" tc qdisc del dev "$dev" root 2>/dev/null || true
    [ "$rate" = unlimited ] && return 0
    "${run[@]}" tc qdisc add dev "$dev" root handle 1: htb default 10
    # burst of a few packets per ms tick keeps htb accurate at high rates
    "${run[@]}" tc class add dev "$dev" parent 1: classid 1:10 htb rate "$rate" ceil "$rate" burst 256k cburst 256k quantum 60000
}

set_rate() {
    local rate=$1 n i
    n=$(host_count)
    [ "$n" -gt 0 ] || die "no emulated hosts (run: $0 up H)"
    for ((i = 0; i < n; i++)); do
        shape "$kPrefix$i" eth0 "$rate"
        shape "" "dtv$i" "$rate"
    done
    echo "$rate" > "$kState/rate"
}

up() {
    local n=$1 rate=${2:-unlimited} i
    [[ "$n" =~ ^[1-9][0-9]?$ ]] || die "up wants a host count 1-99, got '$n'"
    [ "$(id -u)" = 0 ] || unavailable "needs root (CAP_NET_ADMIN)"
    [ -e "$kState" ] && down >/dev/null
    command -v ip >/dev/null && command -v tc >/dev/null || unavailable "no ip or tc (apt-get install iproute2)"
    ip netns add "${kPrefix}probe" 2>/dev/null || unavailable "ip netns add failed"
    ip netns del "${kPrefix}probe"
    local cpus cores
    cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # nproc itself honours both
    cores=${CORES:-$((cpus / n))}
    [[ "$cores" =~ ^[0-9]+$ ]] || die "CORES wants a count of cores per host, got '$cores'"
    [ $((cores * n)) -le "$cpus" ] || die "CORES=$cores for $n hosts needs $((cores * n)) cores; this machine has $cpus"
    mkdir -p "$kState"
    ip link add "$kBridge" type bridge
    ip addr add "$kSubnet.254/24" dev "$kBridge"
    ip link set "$kBridge" up
    for ((i = 0; i < n; i++)); do
        ip netns add "$kPrefix$i"
        ip link add "dtv$i" type veth peer name eth0 netns "$kPrefix$i"
        ip link set "dtv$i" master "$kBridge" up
        ip netns exec "$kPrefix$i" ip addr add "$kSubnet.$((i + 1))/24" dev eth0
        ip netns exec "$kPrefix$i" ip link set eth0 up
        ip netns exec "$kPrefix$i" ip link set lo up
        echo "$kSubnet.$((i + 1)) $kPrefix$i $(core_list "$i" "$cores")" >> "$kState/map"
    done
    echo "$n" > "$kState/hosts"
    set_rate "$rate"
    write_hostfile "$n"
    echo "emulate-hosts: $n hosts, link $rate each, $( [ "$cores" -gt 0 ] && echo "$cores core(s)" || echo "the cores shared" ) each, hostfile $kState/hostfile"
}

# Host I's cores as a taskset list (I*C to I*C+C-1), or "all" when C is 0.
core_list() {
    local i=$1 c=$2
    [ "$c" -gt 0 ] && echo "$((i * c))-$((i * c + c - 1))" || echo all
}

write_hostfile() {
    local n=$1 slots=${SLOTS:-2} i
    : > "$kState/hostfile"
    for ((i = 0; i < n; i++)); do echo "$kSubnet.$((i + 1)) slots=$slots" >> "$kState/hostfile"; done
}

down() {
    local n i
    n=$(host_count)
    for ((i = 0; i < n; i++)); do
        ip netns pids "$kPrefix$i" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
        ip netns del "$kPrefix$i" 2>/dev/null || true
        ip link del "dtv$i" 2>/dev/null || true
    done
    ip link del "$kBridge" 2>/dev/null || true
    rm -rf "$kState"
    echo "emulate-hosts: removed"
}

cut() {
    local i=$1
    [ "$i" -lt "$(host_count)" ] || die "no host $i"
    ip netns exec "$kPrefix$i" ip link set eth0 down
    echo "emulate-hosts: host $i's link is down"
}

run_mpirun() {
    [ "$(host_count)" -gt 0 ] || die "no emulated hosts (run: $0 up H)"
    # --bind-to none: each host would bind its first rank to core 0, and the hosts share the cores
    exec mpirun --hostfile "$kState/hostfile" --bind-to none \
        --mca plm_rsh_agent "$here/netns-agent.sh" \
        --mca btl self,tcp --mca btl_tcp_if_include "$kSubnet.0/24" \
        --mca oob_tcp_if_include "$kSubnet.0/24" "$@"
}

case "${1:-}" in
    up) [ $# -ge 2 ] || die "usage: $0 up H [RATE]"; up "$2" "${3:-unlimited}" ;;
    rate) [ $# -eq 2 ] || die "usage: $0 rate RATE"; set_rate "$2"; echo "emulate-hosts: link $2 each" ;;
    cut) [ $# -eq 2 ] || die "usage: $0 cut I"; cut "$2" ;;
    down) down ;;
    mpirun) shift; run_mpirun "$@" ;;
    *) die "usage: $0 up H [RATE] | rate RATE | cut I | down | mpirun ARGS" ;;
esac
