#!/bin/sh
# assets.sh prepares everything cmd/vmexec needs to run a program inside a
# small qemu VM with a cgroup-v2 kernel: qemu and busybox (from Debian's
# packages), a Debian 6.1 kernel unpacked into a cache directory (nothing is
# installed into /boot) and an initramfs built around test/vm/init.
#
# Idempotent; with a warm cache it only checks a few files and prints the paths.
#
#   DDISKQOS_VM_CACHE   cache directory (default $HOME/.cache/ddiskqos/vm)
#   DDISKQOS_VM_KERNEL  kernel release to use, e.g. 6.1.0-56-amd64
#                       (default: the one already in the cache, else the
#                       newest 6.1.0-N-amd64 that apt-cache offers)
#
# Usage: test/vm/assets.sh [--refresh]   (--refresh: look for a newer kernel)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
cache=${DDISKQOS_VM_CACHE:-$HOME/.cache/ddiskqos/vm}
refresh=0
for arg in "$@"; do
	case $arg in
	--refresh) refresh=1 ;;
	-h | --help) sed -n '2,15p' "$0"; exit 0 ;;
	*) echo "assets.sh: unknown argument $arg" >&2; exit 2 ;;
	esac
done

# Modules loaded at boot, in addition to their dependencies.
modules="virtio_pci virtio_blk virtio_console 9pnet_virtio 9p bfq kyber_iosched ext4 crc32c_generic loop"
# Modules (and their dependencies) shipped in /modules but not loaded at
# boot: a test loads them with insmod and its own parameters (null_blk:
# a device of known speed; see internal/calibrate's VM test).
ondemand="null_blk"

die() { echo "assets.sh: $*" >&2; exit 1; }
log() { echo "assets.sh: $*" >&2; }

mkdir -p "$cache" || die "cannot create cache directory $cache"

# --- host packages -----------------------------------------------------------
apt_updated=0
apt_update() {
	[ $apt_updated = 1 ] && return 0
	log "apt-get update"
	apt-get update -qq >&2 || die "apt-get update failed"
	apt_updated=1
}
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'ok installed'; }

missing=""
command -v qemu-system-x86_64 >/dev/null 2>&1 || missing="$missing qemu-system-x86"
installed busybox-static || missing="$missing busybox-static"
if [ -n "$missing" ]; then
	[ "$(id -u)" = 0 ] || die "need root to install:$missing (or install them yourself)"
	apt_update
	log "apt-get install$missing (log: $cache/apt.log)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing >"$cache/apt.log" 2>&1 || {
		tail -n 20 "$cache/apt.log" >&2
		die "apt-get install$missing failed (log: $cache/apt.log)"
	}
fi
busybox=/bin/busybox
[ -x "$busybox" ] || die "$busybox missing although busybox-static is installed"

# --- kernel ------------------------------------------------------------------
release=${DDISKQOS_VM_KERNEL:-}
if [ -z "$release" ] && [ $refresh = 0 ] && [ -f "$cache/release" ]; then
	release=$(cat "$cache/release")
fi
if [ -z "$release" ]; then
	apt_update
	# The generic flavour: -cloud- lacks 9p, -rt- is another scheduler.
	release=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' |
		sed -n 's/^linux-image-\(6\.1\.0-[0-9]*-amd64\) .*/\1/p' | sort -V | tail -n 1)
	[ -n "$release" ] || die "apt-cache offers no linux-image-6.1.0-N-amd64"
fi
case $release in
*-amd64) ;;
*) die "kernel release $release is not a generic -amd64 flavour" ;;
esac

kdir=$cache/kernel-$release
if [ ! -f "$kdir/.complete" ]; then
	log "fetching linux-image-$release"
	tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	# Sandbox user root: the download goes into a directory _apt cannot write.
	download() { (cd "$tmp" && apt-get download -q -o APT::Sandbox::User=root "linux-image-$release" >/dev/null); }
	if ! download 2>/dev/null; then
		apt_update
		download || die "apt-get download linux-image-$release failed"
	fi
	dpkg-deb -x "$tmp"/linux-image-*.deb "$tmp/x" || die "dpkg-deb -x failed"
	mkdir -p "$tmp/k"
	mv "$tmp/x/boot/vmlinuz-$release" "$tmp/k/vmlinuz"
	mv "$tmp/x/boot/config-$release" "$tmp/k/config"
	mv "$tmp/x/lib/modules/$release/kernel" "$tmp/k/modules"
	rm -rf "$kdir"
	mv "$tmp/k" "$kdir"
	rm -rf "$tmp"
	trap - EXIT
	touch "$kdir/.complete"
fi

# The bzImage's setup header says where its compressed payload is
# (Documentation/x86/boot.rst: setup_sects at 0x1f1, payload_offset at 0x248,
# payload_length at 0x24c, both relative to the protected-mode code that
# follows the (setup_sects+1)*512 bytes of real-mode setup). The payload
# decompresses to the ELF vmlinux, which qemu boots directly through its PVH
# entry point (CONFIG_PVH=y), skipping the in-guest decompression (~3 s
# under TCG).
if [ ! -f "$kdir/vmlinux" ]; then
	u8() { od -An -t u1 -j "$2" -N 1 "$1" | tr -d ' '; }
	u32() { od -An -t u4 -j "$2" -N 4 "$1" | tr -d ' '; }
	img=$kdir/vmlinuz
	setup=$(u8 "$img" $((0x1f1)))
	[ "$setup" = 0 ] && setup=4
	poff=$(u32 "$img" $((0x248)))
	plen=$(u32 "$img" $((0x24c)))
	start=$(((setup + 1) * 512 + poff))
	case $(od -An -t x1 -j $start -N 2 "$img" | tr -d ' ') in
	fd37) dec="xz -dc" ;;
	1f8b) dec="gzip -dc" ;;
	28b5) dec="zstd -dc" ;;
	*) die "unknown payload compression in $img at offset $start" ;;
	esac
	log "extracting vmlinux from $img ($dec)"
	tail -c +$((start + 1)) "$img" | head -c "$plen" | $dec >"$kdir/vmlinux.tmp" 2>/dev/null || true
	[ "$(od -An -c -N 4 "$kdir/vmlinux.tmp" | tr -d ' ')" = '177ELF' ] ||
		die "could not extract an ELF vmlinux from $img"
	mv "$kdir/vmlinux.tmp" "$kdir/vmlinux"
fi

# --- initramfs ---------------------------------------------------------------
# Module files by module name ("kyber-iosched.ko" is module kyber_iosched).
modfile() {
	f=$(find "$kdir/modules" -name "$1.ko" -o -name "$(echo "$1" | tr _ -).ko" | head -n 1)
	[ -n "$f" ] || die "module $1 not found under $kdir/modules"
	echo "$f"
}
# Depth-first: dependencies are printed before the modules that need them.
resolved=" "
resolve() {
	case $resolved in *" $1 "*) return 0 ;; esac
	f=$(modfile "$1")
	for d in $(tr '\0' '\n' <"$f" | sed -n 's/^depends=//p' | tr , ' '); do
		resolve "$d"
	done
	resolved="$resolved$1 "
	echo "$(modfile "$1")"
}

# The stamp covers everything the initramfs is made of.
stamp=$( (
	echo "$release $modules / $ondemand"
	cat "$here/init"
	ls -l --time-style=+%s "$busybox"
) | sha256sum | cut -c1-16)
initrd=$cache/initramfs-$stamp.cpio
if [ ! -f "$initrd" ]; then
	log "building $initrd"
	root=$(mktemp -d "$cache/.root.XXXXXX")
	trap 'rm -rf "$root"' EXIT
	mkdir -p "$root/bin" "$root/modules" "$root/proc" "$root/sys" "$root/dev" \
		"$root/tmp" "$root/run" "$root/etc" "$root/root" "$root/usr" "$root/mnt"
	cp "$busybox" "$root/bin/busybox"
	for a in $("$busybox" --list); do
		[ "$a" = busybox ] || ln -s busybox "$root/bin/$a"
	done
	ln -s bin "$root/sbin"
	# Host's /usr is shared read-only at /usr; the host is merged-/usr.
	ln -s usr/lib "$root/lib"
	ln -s usr/lib64 "$root/lib64"
	printf 'root:x:0:0:root:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
	ln -s /proc/mounts "$root/etc/mtab"
	cp "$here/init" "$root/init"
	chmod 755 "$root/init"
	for m in $modules; do resolve "$m"; done >"$root/modules/files"
	while read -r f; do
		cp "$f" "$root/modules/"
		echo "/modules/${f##*/}"
	done <"$root/modules/files" >"$root/modules/order"
	rm "$root/modules/files"
	resolved=" " # on-demand modules may share dependencies with the boot list
	for m in $ondemand; do resolve "$m"; done | while read -r f; do
		[ -e "$root/modules/${f##*/}" ] || cp "$f" "$root/modules/"
	done
	(cd "$root" && find . | LC_ALL=C sort | "$busybox" cpio -o -H newc 2>/dev/null) >"$initrd.tmp" ||
		die "cpio failed"
	mv "$initrd.tmp" "$initrd"
	rm -rf "$root"
	trap - EXIT
fi

# Stable names for cmd/vmexec.
ln -sfn "kernel-$release/vmlinux" "$cache/kernel"
ln -sfn "${initrd##*/}" "$cache/initramfs"
echo "$release" >"$cache/release.tmp" && mv "$cache/release.tmp" "$cache/release"
# Drop initramfs images of older stamps.
for f in "$cache"/initramfs-*.cpio; do
	[ "$f" = "$initrd" ] || rm -f "$f"
done

echo "qemu=$(command -v qemu-system-x86_64)"
echo "kernel=$cache/kernel"
echo "initramfs=$cache/initramfs"
echo "release=$release"
