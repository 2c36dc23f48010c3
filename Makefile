# ddiskqos — build and test. `make test` is the one command that runs every
# test: the host's real-kernel tests (cgroup v1, loop devices, the Docker
# engine), the cgroup v2 tests inside the nested test VM, and a short fuzz run.
# It needs root and installs what it lacks (qemu, busybox, the VM's kernel).

SHELL     := /bin/bash
.SHELLFLAGS := -o pipefail -ec
GO        ?= go
BIN       := $(CURDIR)/bin
# Packages holding tests that must run inside the v2 test VM.
V2_PKGS    = $(shell grep -rl --include='*_test.go' '^func TestRealV2' internal cmd 2>/dev/null | xargs -r -n1 dirname | sort -u | sed 's|^|./|')
FUZZTIME  ?= 50000x

.PHONY: all build image man generate test deps kube-deps vet test-host test-v2 test-v2-docker-full fuzz clean hoststate-save hoststate-check

all: build

# The binary the README installs: static (CGO_ENABLED=0: it runs in the
# FROM scratch image and on any host), with the commit it was built from
# (ddiskqos version; -buildvcs=auto overrides a GOFLAGS=-buildvcs=false).
# A release sets the version: make build VERSION=v1.2.0.
VERSION   ?=
LDFLAGS   := -s -w $(if $(VERSION),-X github.com/ddiskqos/ddiskqos/internal/buildinfo.version=$(VERSION))
GOBUILD    = CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=auto -ldflags '$(LDFLAGS)'

build:
	$(GOBUILD) -o $(BIN)/ddiskqos ./cmd/ddiskqos

# The container image of deploy/docker (FROM scratch and the binary, built
# offline): the binary into the build context, then docker build as $(IMAGE).
# DOCKER_BUILD_FLAGS adds to docker build (--label k=v, ...).
IMAGE     ?= ddiskqos:latest
DOCKER_BUILD_FLAGS ?=
image:
	$(GOBUILD) -o deploy/docker/ddiskqos ./cmd/ddiskqos
	docker build $(DOCKER_BUILD_FLAGS) -t $(IMAGE) deploy/docker

# The man page is generated from the commands' declarations (internal/cli);
# TestManPageUpToDate fails until it is regenerated.
man:
	$(GO) run ./cmd/ddiskqos man > docs/ddiskqos.1

# The BPF program of the I/O latency sensor (internal/iolat/iolat.c), compiled
# by bpf2go with clang into iolat_bpfel.o and its Go file, both committed so
# that building needs Go alone; TestGeneratedCurrent fails until they are
# regenerated. Needs clang and llvm-strip (apt-get install clang llvm).
generate:
	$(GO) generate ./internal/iolat

$(BIN)/vmexec: FORCE
	CGO_ENABLED=0 $(GO) build -o $(BIN)/vmexec ./cmd/vmexec

deps:
	bash test/vm/assets.sh

# kubelet and containerd for cmd/ddiskqos's TestRealKubelet*, built from
# the Go module proxy and cached per machine under /root/.cache/ddiskqos
# (DDISKQOS_KUBE_CACHE): nothing once cached; on a fresh machine 14 min
# (module download, cold GOCACHE; test/kubelet/README.md has the figures),
# so that the test itself never builds inside go test's timeout.
kube-deps:
	KUBE_BUILD_ONLY=1 bash test/kubelet/run.sh

# Nested modules: test-only code whose dependencies stay out of go.mod
# (deploy/grafana: Prometheus's PromQL parser for the dashboard's check).
# `go test ./...` at the top does not enter them.
SUBMODULES := deploy/grafana

vet:
	$(GO) vet ./...
	for m in $(SUBMODULES); do (cd $$m && $(GO) vet ./...); done

# Every test. Missing prerequisites fail instead of skipping. The host must
# be as the tests found it (test/hoststate.sh: docker0, containers, images,
# loop devices, schedulers, cgroups, mounts).
test: deps kube-deps vet hoststate-save test-host test-v2 fuzz hoststate-check

hoststate-save:
	@mkdir -p $(BIN)
	bash test/hoststate.sh save $(BIN)/hoststate.before

hoststate-check:
	bash test/hoststate.sh check $(BIN)/hoststate.before

# The host tests whose bars are a victim's latency against its idle (or a
# disk's rate against its floor) run alone, after the others: `go test
# ./...` runs two packages at once, and another package's streams on loop
# devices over the same disk put a 126 ms read under a constant cap into
# TestRealV1LatencyEffect's victim (9.5x idle against its 5x bar, in a
# make test at a load of 23; alone on this machine the same build gave
# 1.2-2.1x). internal/throttle's TestRealV1LiftGuard predicts a lift from
# a paced neighbour's time in flight alone on the disk: in a CI run at a
# load of 21, beside the kubelet's and the host bench's streams, a QD1
# reader at 150 MB/s looked queued (LiftQueues true). internal/daemon's
# TestRealV1LatencyInSnapshot compares the sensor's median with a
# real-time reader's own timing: in a make test at a load of ~20 the
# reader's p50 was 0.81 ms against the sensor's bucket (0.26, 0.52] ms.
# Two more need the disk to themselves for another reason, other tests'
# daemons: each daemon that starts enables v1 accounting on every disk it
# sees, and in the CI run of 2d6fd7b one started while internal/cgroupfs's
# TestRealV1AccountingNeedsEnabling read its brand-new loop device, which
# then counted before any rule of the test's own (502763520 of 503316480
# bytes); and internal/daemon's TestRealV1KernelActivity found the sensor
# 9 requests of 256 short of the counter file (13 on the disk below), where
# alone it loses 0-3.
QUIET_TESTS := ^(TestRealV1LatencyEffect|TestRealV1NoHarm|TestRealV1LatencyControl|TestRealV1NoFalseExhaustion|TestRealV1LiftGuard|TestRealV1LatencyInSnapshot|TestRealV1KernelActivity|TestRealV1AccountingNeedsEnabling)$$
QUIET_PKGS := ./cmd/ddiskqos ./internal/throttle ./internal/daemon ./internal/cgroupfs

# On a failure the failing tests' own lines are printed again at the end
# (bin/test-failed.txt), so that a CI log cut in its middle still says why.
test-host:
	@mkdir -p $(BIN)
	DDISKQOS_REQUIRE_REAL=1 $(GO) test -count=1 -timeout 30m -skip '$(QUIET_TESTS)' ./... 2>&1 | tee $(BIN)/test-host.log; \
		rc=$${PIPESTATUS[0]}; [ "$$rc" -eq 0 ] || { bash test/failed.sh $(BIN)/test-host.log | tee $(BIN)/test-failed.txt; exit $$rc; }
	for m in $(SUBMODULES); do (cd $$m && DDISKQOS_REQUIRE_REAL=1 $(GO) test -count=1 ./...); done
	sync; sleep 10 # the parallel step's writeback settles first
	DDISKQOS_REQUIRE_REAL=1 $(GO) test -count=1 -timeout 30m -v -p 1 -run '$(QUIET_TESTS)' $(QUIET_PKGS) 2>&1 | tee $(BIN)/test-quiet.log; \
		rc=$${PIPESTATUS[0]}; [ "$$rc" -eq 0 ] || { bash test/failed.sh $(BIN)/test-quiet.log; exit $$rc; }
	@n=$$(grep -cE -- '^--- PASS: TestRealV1(LatencyEffect|NoHarm|LatencyControl|NoFalseExhaustion|LiftGuard|LatencyInSnapshot|KernelActivity|AccountingNeedsEnabling) ' $(BIN)/test-quiet.log); \
		[ "$$n" -eq 8 ] || { echo "test-host: $$n of the 8 quiet tests passed (bin/test-quiet.log)"; exit 1; }

# The VM: 2 GiB (cmd/ddiskqos's runs the Docker engine, vfs on tmpfs), a 3 GiB
# sparse test disk (TestRealV2BenchContention's volume and iocost calibration
# twin, ~1.6 GiB), and vmexec's timeout past go test's so that the test binary's panic wins. One
# package's VM at a time (-p 1): each VM has two emulated CPUs, and two VMs
# on a two-core host slowed each other's emulated I/O and timers.
test-v2: $(BIN)/vmexec
	DDISKQOS_REQUIRE_REAL=1 CGO_ENABLED=0 $(GO) test -count=1 -timeout 30m -v \
		-p 1 -exec "$(BIN)/vmexec -mem 2G -disk-size 3G -timeout 31m" -run 'TestRealV2' $(V2_PKGS) 2>&1 | tee $(BIN)/test-v2.log; \
		rc=$${PIPESTATUS[0]}; [ "$$rc" -eq 0 ] || { bash test/failed.sh $(BIN)/test-v2.log; exit $$rc; }
	@! grep -E -- '--- SKIP' $(BIN)/test-v2.log || { echo 'test-v2: a v2 test skipped'; exit 1; }

# Docker on v2 with the daemon's default thresholds and tick; make test
# runs the same with thresholds of a few MiB (TestRealV2DockerShort).
test-v2-docker-full: $(BIN)/vmexec
	DDISKQOS_REQUIRE_REAL=1 CGO_ENABLED=0 $(GO) test -count=1 -timeout 30m -v \
		-exec "$(BIN)/vmexec -v -mem 2G -timeout 31m" -run 'TestVMDockerV2' ./cmd/ddiskqos

fuzz:
	FUZZTIME=$(FUZZTIME) bash test/fuzz.sh

clean:
	rm -rf $(BIN) deploy/docker/ddiskqos

FORCE:
