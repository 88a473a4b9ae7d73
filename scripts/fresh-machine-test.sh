#!/usr/bin/env bash
# Proves the README on a bare Debian 12: bootstraps a minimal root (debootstrap
# --variant=minbase bookworm), copies the committed tree into it (git archive HEAD),
# and runs inside it, under chroot, the README's set-up command and then its test
# command, exactly as written there (the main job shortened to one epoch).
# The bootstrapped root is cached as a tarball in $DISTRAIN_FRESH_CACHE (default
# /tmp/distrain-fresh-root) so that later runs on the same machine skip debootstrap;
# every run starts from an unpacked copy of it, never from a root used before.
# Needs root, debootstrap and network access to the Debian mirror.
#   scripts/fresh-machine-test.sh            set-up + main job + tests
#   scripts/fresh-machine-test.sh --setup    set-up + main job only
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${DISTRAIN_FRESH_CACHE:-/tmp/distrain-fresh-root}
mirror=${DISTRAIN_FRESH_MIRROR:-http://deb.debian.org/debian}
run_tests=1
[ "${1:-}" = "--setup" ] && run_tests=0

die() { echo "fresh-machine-test: $*" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap and chroot)"
command -v debootstrap >/dev/null || die "debootstrap is missing (apt-get install debootstrap)"

# The README's command in the fenced block that follows a "<!-- fresh-machine: NAME -->" line.
readme_command() {
  local cmd
  cmd=$(awk -v tag="<!-- fresh-machine: $1 -->" '
    $0 == tag { found = 1; next }
    found && /^```/ { if (inside) exit; inside = 1; next }
    found && inside { print }' "$repo/README.md")
  [ -n "$cmd" ] || die "README.md has no command block marked '<!-- fresh-machine: $1 -->'"
  echo "$cmd"
}
setup_cmd=$(readme_command setup)
test_cmd=$(readme_command test)

bootstrap_tarball() {
  local tarball="$cache/bookworm-minbase.tar"
  if [ ! -s "$tarball" ]; then
    local tmp
    tmp=$(mktemp -d /tmp/distrain-debootstrap.XXXXXX)
    echo "== debootstrap --variant=minbase bookworm ($mirror)" >&2
    debootstrap --variant=minbase bookworm "$tmp" "$mirror" >"$tmp.log" 2>&1 \
      || { tail -20 "$tmp.log" >&2; rm -rf "$tmp" "$tmp.log"; die "debootstrap failed"; }
    mkdir -p "$cache"
    tar -C "$tmp" -cf "$tarball.part" . && mv "$tarball.part" "$tarball"
    rm -rf "$tmp" "$tmp.log"
  fi
  echo "$tarball"
}

root=$(mktemp -d /tmp/distrain-fresh.XXXXXX)
cleanup() {
  for m in dev/pts dev/shm dev proc sys; do
    mountpoint -q "$root/$m" 2>/dev/null && umount -l "$root/$m"
  done
  rm -rf --one-file-system "$root"
}
trap cleanup EXIT

seconds() { date +%s; }
t0=$(seconds)
tar -C "$root" -xf "$(bootstrap_tarball)"
t_bootstrap=$(( $(seconds) - t0 ))

# A real Debian 12 install also has the updates and security suites.
cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb ${mirror%/debian}/debian-security bookworm-security main
EOF
cp /etc/resolv.conf "$root/etc/resolv.conf"
# debootstrap writes no /etc/hosts; Debian's installer writes this one. Without it the
# host's own name goes to DNS, and every mpirun launch waits 5-10 s for that to time out
# (the suite's mpirun tests took 8x their time on the host).
hostname -s >"$root/etc/hostname"
cat >"$root/etc/hosts" <<EOF
127.0.0.1	localhost
127.0.1.1	$(hostname -s)
::1		localhost ip6-localhost ip6-loopback
EOF
# Network plumbing too: where this host reaches PyPI through a TLS-intercepting proxy
# (CAs added under /usr/local/share/ca-certificates), pip in the root (the TensorBoard
# test's reference reader) trusts the same CAs. A machine without such a proxy needs none.
network_env=()
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null && [ -s /etc/ssl/certs/ca-certificates.crt ]; then
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/host-ca-certificates.crt"
  network_env=(PIP_CERT=/etc/host-ca-certificates.crt)
fi
mkdir -p "$root/root/distrain"
git -C "$repo" archive HEAD | tar -C "$root/root/distrain" -x
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --bind /dev "$root/dev"
mount -t devpts devpts "$root/dev/pts" 2>/dev/null || true
mount -t tmpfs tmpfs "$root/dev/shm"

in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 "${network_env[@]}" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/bash -c "cd /root/distrain && $1"
}

echo "== set-up (README): $setup_cmd --set train.epochs=1" >&2
t0=$(seconds)
in_root "$setup_cmd --set train.epochs=1" || die "the README's set-up command failed in a fresh Debian 12 root"
t_setup=$(( $(seconds) - t0 ))

t_tests=0
if [ "$run_tests" -eq 1 ]; then
  echo "== tests (README): $test_cmd" >&2
  t0=$(seconds)
  in_root "$test_cmd" || die "the README's test command failed in a fresh Debian 12 root"
  t_tests=$(( $(seconds) - t0 ))
fi
echo "fresh-machine-test: passed (root unpacked ${t_bootstrap}s, set-up + 1-epoch job ${t_setup}s, tests ${t_tests}s)"
