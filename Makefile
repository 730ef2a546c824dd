# rampart — the two commands: `make run` and `make test`.
GO      ?= go
BIN     ?= bin/rampart
PKGS    ?= ./...
FUZZTIME ?= 10s
# Version and commit stamped into the binary (`rampart version`) and the .deb: a v* tag
# when HEAD has one (v1.2.3-4-gabc → 1.2.3+4+gabc), else 0.0.0~git<commit time>.<short hash>.
GIT_COMMIT := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
VERSION ?= $(shell git describe --tags --match 'v[0-9]*' 2>/dev/null | sed 's/^v//; s/-/+/g' | grep . || \
	echo "0.0.0~git$$(git log -1 --format=%cd --date=format:%Y%m%d%H%M%S 2>/dev/null).$$(git rev-parse --short=12 HEAD 2>/dev/null)")
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(GIT_COMMIT)

.PHONY: run build test deps vet fuzz bench perf perf-quick gen-bpf clean lab lab-down drill deb deb-test image image-test

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/rampart

## run: build and start the all-in-one quickstart on loopback
run: build
	$(BIN) up

deps:
	hack/deps.sh test

## lab: build and bring up the lab (lab/README.md): namespaces, BIRD, control plane, four sites; as root.
## A lab left in LAB_DIR (even after a crash) is removed first.
LAB_DIR ?= .rampart-lab
LAB_PREFIX ?= rl
lab: build
	$(BIN) lab up -dir $(LAB_DIR) -prefix $(LAB_PREFIX)

## lab-down: remove everything the lab made (namespaces, processes, bpffs mounts, cgroups, LAB_DIR)
lab-down: build
	$(BIN) lab down -dir $(LAB_DIR)

## drill: run a failure drill against the running lab: make drill NAME=failover
drill: build
	@test -n "$(NAME)" || { echo "make drill NAME=<drill> (rampart lab drill -h)"; exit 2; }
	$(BIN) lab drill -dir $(LAB_DIR) $(NAME)

## test: install what the tests need, then run every test, vet, and a short fuzz pass
test: deps vet
	$(GO) test -race -count=1 $(PKGS)
	cd images/deb && $(GO) vet ./... && $(GO) test -race -count=1 ./...
	hack/fuzz.sh $(FUZZTIME)

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)

## fuzz: every fuzz target for FUZZTIME each
fuzz:
	hack/fuzz.sh $(FUZZTIME)

bench:
	$(GO) test -count=1 -run '^$$' -bench . -benchmem $(PKGS)

## perf: the perf lab report, full suite (~30 min): perf/out/report.html and perf/out/results.json
## (perf/README.md); installs nginx, haproxy, wrk, h2load. PERF_LAB=1 adds the lab drills (root).
perf:
	hack/deps.sh perf
	$(GO) run ./perf/report -suite full -out perf/out

## perf-quick: the same report from a ~2-minute subset (one short round, two rates)
perf-quick:
	hack/deps.sh perf
	$(GO) run ./perf/report -suite quick -out perf/out

## gen-bpf: recompile bpf/rampart.c and its Go bindings (needs clang; objects are committed)
gen-bpf:
	hack/deps.sh gen
	hack/gen-bpf.sh

## deb: dist/rampart_<version>_amd64.deb (static binary, units, configs; images/deb uses nfpm)
deb:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS) -s -w" -o bin/deb/rampart ./cmd/rampart
	cd images/deb && $(GO) run . -root ../.. -binary ../../bin/deb/rampart -version '$(VERSION)' -out ../../dist

## deb-test: the package's tests (units, .deb contents, install and purge in a debootstrap chroot)
deb-test:
	hack/deps.sh images
	cd images/deb && $(GO) test -count=1 -v ./...

## image: a bootable Debian 12 disk image of a node, bin/image/rampart.img (root; images/rootfs/README.md)
image: deb
	hack/deps.sh images
	images/rootfs/build.sh

## image-test: build a test image (images/rootfs/test/) and boot it under qemu (TCG) until the agent and proxy are active
image-test: deb
	hack/deps.sh images
	OUT=bin/image-test NODE_YAML=images/rootfs/test/node.yaml EXTRA_DIR=images/rootfs/test/overlay \
	  EXTRA_UNITS=rampart-image-check.service images/rootfs/build.sh
	images/rootfs/boot-test.sh bin/image-test/rampart.img

clean:
	rm -rf bin dist
