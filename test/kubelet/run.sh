#!/usr/bin/env bash
# test/kubelet/run.sh: a standalone kubelet over containerd on this machine, no
# API server and no registry. Groundwork for a real-kubelet test (issue 38,
# item 3), not the ddiskqos test itself.
#
# It builds kubelet (k8s.io/kubernetes) and containerd v2 (with ctr and the
# runc shim) from the Go module proxy through the wrapper modules beside this
# script, caching the binaries under $DDISKQOS_KUBE_CACHE (a second run does
# not build); builds a local pause image (a static Go binary in a FROM scratch
# image, built by the local Docker engine) and imports it into containerd's
# k8s.io namespace; starts containerd and kubelet with all their state in a
# temp dir; runs three static pods (Guaranteed, Burstable, BestEffort; host
# network, so no CNI); waits for them to be Running; prints each pod's and
# container's cgroup paths in the v1 blkio hierarchy; and tears everything
# down on exit (processes, mounts, cgroups, iptables chains, sysctls).
#
# Needs root, runc (Debian's), Docker (for the pause image), jq and curl.
# Environment:
#   DDISKQOS_KUBE_CACHE   binary cache (default /root/.cache/ddiskqos)
#   KUBE_KEEP=1           leave everything running; print how to tear it down
#   KUBE_WAIT             seconds to wait for Running (default 180)
#   KUBE_PORT             kubelet's read-only port on 127.0.0.1 (default 10255)
#   KUBE_CGROUP_ROOT      kubelet's --cgroup-root (default /)
#   KUBE_SERVE=FILE       for a test (cmd/ddiskqos's TestRealKubelet*): start
#                         containerd and the kubelet, run no pods of its own,
#                         write STATE, MANIFESTS and RO_PORT lines (KEY=VALUE)
#                         into FILE once the kubelet answers, and stay until
#                         SIGTERM or SIGINT (then tear down, exit 0) or until
#                         the kubelet exits (tear down, exit 1); the caller
#                         puts its pod manifests (*.yaml) into MANIFESTS
#   KUBE_IMAGE_FILES      files (space-separated paths) added to the pause
#                         image at / beside /pause, e.g. a static workload binary
#   KUBE_NO_BUILD=1       fail (exit 3) instead of building what is not cached
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# The versions are the wrapper modules' requirements (go mod tidy keeps them
# in the require block, marked indirect).
modver() { awk -v m="$1" '($1 == m && $2 ~ /^v/) {print $2; exit}' "$2"; }
KUBE_VERSION=$(modver k8s.io/kubernetes "$HERE/kubelet/go.mod")
CTRD_VERSION=$(modver github.com/containerd/containerd/v2 "$HERE/containerd/go.mod")
CACHE=${DDISKQOS_KUBE_CACHE:-/root/.cache/ddiskqos}
KBIN=$CACHE/kubelet/$KUBE_VERSION
CBIN=$CACHE/containerd/$CTRD_VERSION
PAUSE_IMAGE=localhost/ddiskqos/pause:1
WAIT=${KUBE_WAIT:-180}
RO_PORT=${KUBE_PORT:-10255}
CGROUP_ROOT=${KUBE_CGROUP_ROOT:-/}
RUNC=${KUBE_RUNC:-$(command -v runc || true)}
[ -n "$KUBE_VERSION" ] && [ -n "$CTRD_VERSION" ] || { echo "run.sh: no version in the wrapper go.mod files" >&2; exit 1; }

log() { printf '%s run.sh: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root"
[ -n "$RUNC" ] || die "runc not found (apt-get install -y runc)"
for c in docker jq curl go; do command -v $c >/dev/null || die "$c not found"; done

# ---- build (cached) ---------------------------------------------------------
# Each build writes into a temp dir and renames it, so a half-built cache
# never counts as built.
build_kubelet() {
	[ -x "$KBIN/kubelet" ] && return 0
	log "building kubelet $KUBE_VERSION (cold: see README.md for the time)"
	local t0=$SECONDS tmp
	tmp=$(mktemp -d "$CACHE/.kubelet.XXXXXX")
	local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
	(cd "$HERE/kubelet" && CGO_ENABLED=0 go build -trimpath \
		-ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor" \
		-o "$tmp/kubelet" k8s.io/kubernetes/cmd/kubelet) || { rm -rf "$tmp"; die "kubelet build failed"; }
	mkdir -p "$(dirname "$KBIN")"; rm -rf "$KBIN"; mv "$tmp" "$KBIN"
	log "built kubelet in $((SECONDS - t0)) s"
}
build_containerd() {
	[ -x "$CBIN/containerd" ] && [ -x "$CBIN/ctr" ] && [ -x "$CBIN/containerd-shim-runc-v2" ] && return 0
	log "building containerd $CTRD_VERSION"
	local t0=$SECONDS tmp
	tmp=$(mktemp -d "$CACHE/.containerd.XXXXXX")
	(cd "$HERE/containerd" && CGO_ENABLED=0 go build -trimpath -tags no_btrfs \
		-ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CTRD_VERSION" \
		-o "$tmp/" github.com/containerd/containerd/v2/cmd/containerd \
		github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
		github.com/containerd/containerd/v2/cmd/ctr) || { rm -rf "$tmp"; die "containerd build failed"; }
	mkdir -p "$(dirname "$CBIN")"; rm -rf "$CBIN"; mv "$tmp" "$CBIN"
	log "built containerd in $((SECONDS - t0)) s"
}
mkdir -p "$CACHE"
if [ "${KUBE_NO_BUILD:-}" = 1 ]; then
	for b in "$KBIN/kubelet" "$CBIN/containerd" "$CBIN/ctr" "$CBIN/containerd-shim-runc-v2"; do
		[ -x "$b" ] || { log "FAIL: $b not built (KUBE_BUILD_ONLY=1 bash $0)"; exit 3; }
	done
fi
build_kubelet
build_containerd
[ "${KUBE_BUILD_ONLY:-}" = 1 ] && { log "built: $KBIN $CBIN"; exit 0; }

# ---- state and teardown -----------------------------------------------------
STATE=$(mktemp -d /tmp/ddiskqos-kube.XXXXXX)
SOCK=$STATE/containerd/containerd.sock
CTR=("$CBIN/ctr" --address "$SOCK" --namespace k8s.io)
CTRD_PID= KUBELET_PID=
SYSCTLS="vm.overcommit_memory kernel.panic kernel.panic_on_oops"
declare -A SYSCTL_WAS
for s in $SYSCTLS; do SYSCTL_WAS[$s]=$(sysctl -n "$s"); done
chains_now() { for ipt in iptables ip6tables; do command -v $ipt >/dev/null || continue
	for t in filter nat mangle; do $ipt -t $t -S 2>/dev/null | awk -v ipt=$ipt -v t=$t '$1=="-N" && $2 ~ /^KUBE-/ {print ipt, t, $2}'; done; done | sort; }
CHAINS_BEFORE=$(chains_now)
# cgroup dirs the kubelet makes: the QoS tree under its cgroup root, in every
# mounted hierarchy (v1 controllers, name=systemd, the unified one).
cg_base() { local r=${CGROUP_ROOT%/}; printf '%s' "$r"; }
CG_EXISTED=
for h in /sys/fs/cgroup/*/; do [ -d "$h$(cg_base)/kubepods" ] && CG_EXISTED+="$h "; done
[ -z "$CG_EXISTED" ] || die "kubepods already exists under $CG_EXISTED: another kubelet (or a leftover) owns it"

# Paths the kubelet hardcodes, outside --root-dir and podLogsDir: removed on
# teardown only if this run made them.
HARDCODED="/var/lib/kubelet /var/log/containers"
HARD_EXISTED=
for d in $HARDCODED; do [ -e "$d" ] && HARD_EXISTED+="$d "; done

our_pids() { # processes whose command line names our state dir (our shims among them)
	local p
	for p in /proc/[0-9]*; do
		tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qF -- "$STATE" && echo "${p#/proc/}"
	done; true; }

teardown() {
	local rc=$?
	trap - EXIT
	if [ -n "${KUBE_SERVE:-}" ]; then
		# Not to be cut short: when a multithreaded caller (a Go test) dies,
		# PR_SET_PDEATHSIG signals us once per thread of it that exits
		# (the kernel reparents us to the next one each time); a second
		# SIGTERM killed the teardown and left kubelet and containerd.
		trap '' INT TERM
	else
		trap - INT TERM
	fi
	set +e
	if [ "${KUBE_KEEP:-}" = 1 ] && [ $rc = 0 ] && [ -z "${KUBE_SERVE:-}" ]; then
		log "KUBE_KEEP=1: left running; state $STATE; kill $KUBELET_PID $CTRD_PID, then run this script's teardown by hand"
		return
	fi
	log "teardown (exit $rc)"
	# 1. The static pods go first, through the kubelet, so it stops them as
	#    it would on a node: remove the manifests, wait for the containers.
	if [ -n "$KUBELET_PID" ] && kill -0 "$KUBELET_PID" 2>/dev/null; then
		rm -f "$STATE"/manifests/*.yaml
		for _ in $(seq 60); do
			[ -z "$("${CTR[@]}" tasks ls -q 2>/dev/null)" ] && break; sleep 1
		done
		kill "$KUBELET_PID"; wait "$KUBELET_PID" 2>/dev/null
	fi
	# 2. Whatever is left in containerd: kill and delete tasks and containers.
	if [ -n "$CTRD_PID" ] && kill -0 "$CTRD_PID" 2>/dev/null; then
		for id in $("${CTR[@]}" tasks ls -q 2>/dev/null); do
			"${CTR[@]}" tasks kill -s KILL "$id" >/dev/null 2>&1
		done
		sleep 1
		for id in $("${CTR[@]}" tasks ls -q 2>/dev/null); do "${CTR[@]}" tasks rm -f "$id" >/dev/null 2>&1; done
		for id in $("${CTR[@]}" containers ls -q 2>/dev/null); do "${CTR[@]}" containers rm "$id" >/dev/null 2>&1; done
		kill "$CTRD_PID"; wait "$CTRD_PID" 2>/dev/null
	fi
	# 3. Shims outlive containerd by design: end ours, by pid.
	local p left
	for p in $(our_pids); do kill "$p" 2>/dev/null; done
	sleep 1
	for p in $(our_pids); do kill -9 "$p" 2>/dev/null; done
	# 4. Mounts under the state dir, deepest first.
	for _ in 1 2 3; do
		left=$(awk -v s="$STATE" 'index($5, s) == 1 {print $5}' /proc/self/mountinfo | sort -r)
		[ -z "$left" ] && break
		for m in $left; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
	done
	# 5. The kubelet's cgroup tree, deepest first, in every hierarchy.
	for h in /sys/fs/cgroup/*/; do
		[ -d "$h$(cg_base)/kubepods" ] || continue
		find "$h$(cg_base)/kubepods" -depth -type d -exec rmdir {} + 2>/dev/null
		[ -d "$h$(cg_base)/kubepods" ] && log "left: cgroup $h$(cg_base)/kubepods"
	done
	# 6. iptables chains the kubelet made (KUBE-IPTABLES-HINT, KUBE-KUBELET-CANARY).
	comm -13 <(printf '%s\n' "$CHAINS_BEFORE") <(chains_now) | while read -r ipt t c; do
		[ -n "$c" ] && { $ipt -t "$t" -F "$c"; $ipt -t "$t" -X "$c"; }
	done
	# 7. The kernel tunables the kubelet sets.
	for s in $SYSCTLS; do sysctl -qw "$s=${SYSCTL_WAS[$s]}"; done
	# 8. /var/log/containers (symlinks into our podLogsDir) and
	#    /var/lib/kubelet/device-plugins/kubelet.sock: the kubelet's fixed paths.
	for l in /var/log/containers/*.log; do
		[ -L "$l" ] && case $(readlink "$l") in "$STATE"/*) rm -f "$l";; esac
	done
	rm -f /var/lib/kubelet/device-plugins/kubelet.sock
	for d in $HARDCODED; do
		case " $HARD_EXISTED " in *" $d "*) continue;; esac
		find "$d" -depth -type d -empty -delete 2>/dev/null
		[ -e "$d" ] && log "left: $d"
	done
	# 9. What is left, said.
	left=$(our_pids); [ -n "$left" ] && log "left: processes $left"
	left=$(grep -F -- "$STATE" /proc/self/mountinfo); [ -n "$left" ] && log "left: mounts $left"
	if [ -n "${KUBE_KEEP_STATE:-}" ]; then log "state kept: $STATE"; else rm -rf "$STATE"; fi
	log "teardown done"
	exit $rc
}
trap teardown EXIT
if [ -n "${KUBE_SERVE:-}" ]; then
	trap 'exit 0' INT TERM # the caller's stop: a clean teardown
	# Should the caller die (its SIGTERM then comes from PR_SET_PDEATHSIG),
	# the pipes it read our output from are closed: a log line must not
	# kill the teardown with SIGPIPE (seen: kubelet and containerd left).
	trap '' PIPE
else
	trap 'exit 130' INT TERM
fi

# ---- containerd -------------------------------------------------------------
mkdir -p "$STATE"/{containerd,kubelet,manifests,logs,pods,cni/net.d,opt}
cat >"$STATE/containerd/config.toml" <<EOF
version = 3
root = "$STATE/containerd/root"
state = "$STATE/containerd/state"
# NRI would listen on /var/run/nri/nri.sock; the ddiskqos tests do not need it.
disabled_plugins = ["io.containerd.nri.v1.nri"]

[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[debug]
  address = "$STATE/containerd/debug.sock"

[plugins.'io.containerd.internal.v1.opt']
  path = "$STATE/opt"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "$PAUSE_IMAGE"
[plugins.'io.containerd.cri.v1.runtime']
  enable_selinux = false
  # This machine refuses a negative oom_score_adj even to root (echo -5 >
  # /proc/self/oom_score_adj: Permission denied), and the CRI gives every
  # sandbox -998 (runc: "failed to update /proc/self/oom_score_adj").
  # Restricted, containerd clamps each score to no lower than its own.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "$RUNC"
        Root = "$STATE/runc"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$STATE/cni/net.d"
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
EOF
log "starting containerd $CTRD_VERSION (state $STATE)"
PATH=$CBIN:$PATH "$CBIN/containerd" --config "$STATE/containerd/config.toml" \
	>"$STATE/containerd.log" 2>&1 &
CTRD_PID=$!
for _ in $(seq 50); do "${CTR[@]}" version >/dev/null 2>&1 && break; sleep 0.2; done
"${CTR[@]}" version >/dev/null 2>&1 || { tail -30 "$STATE/containerd.log" >&2; die "containerd did not answer"; }

# ---- the pause image --------------------------------------------------------
# A static binary in a FROM scratch image, built by the local Docker engine
# and saved to a tarball: no registry anywhere. The same image is the sandbox
# (infra) image and the workload, which only sleeps.
PCTX=$STATE/pause-ctx; mkdir -p "$PCTX"
(cd "$HERE/pause" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$PCTX/pause" .)
cp "$HERE/pause/Dockerfile" "$PCTX/"
for f in ${KUBE_IMAGE_FILES:-}; do
	cp "$f" "$PCTX/"
	printf 'COPY %s /%s\n' "${f##*/}" "${f##*/}" >>"$PCTX/Dockerfile"
done
docker build -q -t "$PAUSE_IMAGE" "$PCTX" >/dev/null 2>"$STATE/docker-build.log" || { cat "$STATE/docker-build.log" >&2; die "docker build"; }
docker save "$PAUSE_IMAGE" -o "$STATE/pause.tar"
docker rmi "$PAUSE_IMAGE" >/dev/null 2>&1 || true
"${CTR[@]}" images import "$STATE/pause.tar" >/dev/null
"${CTR[@]}" images ls -q | grep -qxF "$PAUSE_IMAGE" || die "pause image not in containerd: $("${CTR[@]}" images ls -q)"
log "imported $PAUSE_IMAGE into containerd's k8s.io namespace"

# ---- kubelet ----------------------------------------------------------------
cat >"$STATE/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: $STATE/manifests
fileCheckFrequency: 2s
syncFrequency: 5s
containerRuntimeEndpoint: unix://$SOCK
cgroupDriver: cgroupfs
cgroupRoot: $CGROUP_ROOT
cgroupsPerQOS: true
enforceNodeAllocatable: ["pods"]
failSwapOn: false
failCgroupV1: false
address: 127.0.0.1
port: $((RO_PORT - 5))
readOnlyPort: $RO_PORT
healthzBindAddress: 127.0.0.1
healthzPort: $((RO_PORT - 7))
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
podLogsDir: $STATE/logs
resolvConf: ""
makeIPTablesUtilChains: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Mi", nodefs.available: "0%", imagefs.available: "0%"}
EOF
extra=()
"$KBIN/kubelet" --help 2>&1 | grep -q -- '--pod-infra-container-image' && extra+=(--pod-infra-container-image="$PAUSE_IMAGE")
log "starting kubelet $KUBE_VERSION (standalone, cgroupfs, root $CGROUP_ROOT)"
"$KBIN/kubelet" --config "$STATE/kubelet.yaml" --root-dir "$STATE/kubelet" \
	--cert-dir "$STATE/kubelet/pki" --hostname-override ddiskqos-kube --v 2 "${extra[@]}" \
	>"$STATE/kubelet.log" 2>&1 &
KUBELET_PID=$!

if [ -n "${KUBE_SERVE:-}" ]; then
	t0=$SECONDS
	until curl -fsS "http://127.0.0.1:$RO_PORT/pods" >/dev/null 2>&1; do
		kill -0 "$KUBELET_PID" 2>/dev/null || { tail -40 "$STATE/kubelet.log" >&2; die "kubelet exited"; }
		[ $((SECONDS - t0)) -ge "$WAIT" ] && die "kubelet's read-only port $RO_PORT did not answer within $WAIT s"
		sleep 0.2
	done
	printf 'STATE=%s\nMANIFESTS=%s\nRO_PORT=%s\n' "$STATE" "$STATE/manifests" "$RO_PORT" >"$KUBE_SERVE.tmp"
	mv "$KUBE_SERVE.tmp" "$KUBE_SERVE"
	log "serving: kubelet answers on 127.0.0.1:$RO_PORT after $((SECONDS - t0)) s; manifests go to $STATE/manifests"
	# sleep in the background and wait for it, so that SIGTERM runs the
	# trap at once rather than after the sleep.
	while kill -0 "$KUBELET_PID" 2>/dev/null; do sleep 1 & wait $!; done
	tail -40 "$STATE/kubelet.log" >&2
	die "kubelet exited"
fi

# ---- static pods, one per QoS class ----------------------------------------
pod() { # name, resources block
	cat >"$STATE/manifests/$1.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
  namespace: default
  annotations: {ddiskqos.test: "$1"}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  containers:
  - name: sleeper
    image: $PAUSE_IMAGE
    imagePullPolicy: Never
    command: ["/pause"]
    resources: $2
EOF
}
pod qos-guaranteed '{requests: {cpu: 100m, memory: 32Mi}, limits: {cpu: 100m, memory: 32Mi}}'
pod qos-burstable '{requests: {cpu: 50m, memory: 16Mi}}'
pod qos-besteffort '{}'

pods_json() { curl -fsS "http://127.0.0.1:$RO_PORT/pods" 2>/dev/null; }
log "waiting up to $WAIT s for the three pods to be Running"
t0=$SECONDS
while :; do
	n=$(pods_json | jq '[.items[] | select(.status.phase=="Running") |
		select(all(.status.containerStatuses[]?; .state.running != null))] | length' 2>/dev/null || echo 0)
	[ "$n" = 3 ] && break
	kill -0 "$KUBELET_PID" 2>/dev/null || { tail -40 "$STATE/kubelet.log" >&2; die "kubelet exited"; }
	[ $((SECONDS - t0)) -ge "$WAIT" ] && { grep -E '^E' "$STATE/kubelet.log" | tail -30 >&2; die "pods not Running after $WAIT s ($n of 3)"; }
	sleep 1
done
log "all three pods Running after $((SECONDS - t0)) s"

# ---- the cgroup paths -------------------------------------------------------
BLKIO=/sys/fs/cgroup/blkio
pods_json | jq -r '.items[] | [.metadata.name, .metadata.uid, .status.qosClass,
	(.status.containerStatuses[0].containerID | sub("^containerd://"; ""))] | @tsv' |
while IFS=$'\t' read -r name uid qos cid; do
	podcg=$(find "$BLKIO$(cg_base)/kubepods" -maxdepth 2 -type d -name "pod$uid" | head -1)
	[ -n "$podcg" ] || die "no cgroup for pod $name (pod$uid) under $BLKIO$(cg_base)/kubepods"
	[ -d "$podcg/$cid" ] || die "no cgroup for container $cid of $name under $podcg"
	printf '%-15s %-10s pod       %s\n' "$name" "$qos" "${podcg#"$BLKIO"}"
	printf '%-15s %-10s container %s\n' "$name" "$qos" "${podcg#"$BLKIO"}/$cid"
	for d in "$podcg"/*/; do d=${d%/}; [ "${d##*/}" = "$cid" ] && continue
		printf '%-15s %-10s sandbox   %s\n' "$name" "$qos" "${d#"$BLKIO"}"; done
	pid=$(head -1 "$podcg/$cid/cgroup.procs")
	[ -n "$pid" ] || die "container $cid of $name has no process"
	[ "$(tr '\0' ' ' </proc/$pid/cmdline)" = "/pause " ] || die "container $cid runs $(tr '\0' ' ' </proc/$pid/cmdline)"
	printf '%-15s %-10s oom_score_adj %s (pid %s)\n' "$name" "$qos" "$(cat /proc/$pid/oom_score_adj)" "$pid"
done
log "PASS: kubelet $KUBE_VERSION over containerd $CTRD_VERSION ran a static pod of each QoS class"
