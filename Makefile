# hotreload — run `make help` for the targets.

GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
BRANCH    ?= $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)
# The build identity lives in prometheus/common/version (internal/version
# reads it), as in every Prometheus component. No build user or date, so that
# a build is reproducible.
VERSIONPKG := github.com/prometheus/common/version
LDFLAGS   := -s -w -X $(VERSIONPKG).Version=$(VERSION) -X $(VERSIONPKG).Revision=$(REVISION) -X $(VERSIONPKG).Branch=$(BRANCH)
# The compiler's defaults, inlining included: turning it off (-gcflags=all=-l)
# makes the binary 1.2 MB smaller but a change cost 17 % more CPU (make bench);
# the binary's pages are page cache, not working set (docs/performance.md).
# internal/binary builds with the same flags.
GOBUILD   := CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)'
PLATFORMS := linux/amd64 linux/arm64 linux/arm/v7 linux/ppc64le linux/s390x
IMAGE     ?= hotreload:$(VERSION)
CONTROLLER_IMAGE ?= hotreload-controller:$(VERSION)
BASE      ?= gcr.io/distroless/static-debian12:nonroot
ARCH      ?= $(shell $(GO) env GOARCH)
# The platform of make image and make image-controller: this machine's, or
# ARCH's (32-bit ARM is linux/arm/v7, as in build-all).
PLATFORM  ?= linux/$(ARCH)$(if $(filter arm,$(ARCH)),/v7)
# The image builder: docker (buildx) when a docker engine answers, else
# buildah; IMAGE_TOOL=buildah or IMAGE_TOOL=docker chooses.
IMAGE_TOOL ?= $(shell if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then echo docker; elif command -v buildah >/dev/null 2>&1; then echo buildah; fi)
BUILDAH   ?= buildah --storage-driver vfs

# The Go that go.mod's go line asks for. go-version compares it with the Go
# that builds (GOTOOLCHAIN=auto may have fetched a newer one; GOTOOLCHAIN=local
# never does), and every target that runs Go checks it first.
GO_NEED   := $(shell awk '$$1 == "go" {print $$2; exit}' go.mod)

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-z0-9-]+:.*## / {printf "  %-17s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: go-version
go-version: ## Check that this Go is at least the one go.mod's go line names.
	@have=$$($(GO) env GOVERSION 2>/dev/null | sed 's/^go//'); \
	if [ -z "$$have" ] || [ "$$(printf '%s\n%s\n' '$(GO_NEED)' "$$have" | sort -V | head -n 1)" != '$(GO_NEED)' ]; then \
		echo "hotreload needs Go $(GO_NEED) or newer (go.mod's go line); found: $$(GOTOOLCHAIN=local $(GO) version 2>&1 | head -n 1)"; exit 1; \
	fi

# $(call platform-dir,PLATFORM): where the binaries for PLATFORM go, as the
# Dockerfiles expect them: linux/arm/v7 -> bin/linux_armv7.
platform-dir = bin/$(word 1,$(subst /, ,$(1)))_$(word 2,$(subst /, ,$(1)))$(word 3,$(subst /, ,$(1)))

# $(call cross,PLATFORM,COMMAND): compile ./cmd/COMMAND for PLATFORM.
cross = GOOS=$(word 1,$(subst /, ,$(1))) GOARCH=$(word 2,$(subst /, ,$(1))) GOARM=$(patsubst v%,%,$(word 3,$(subst /, ,$(1)))) \
	$(GOBUILD) -o $(call platform-dir,$(1))/$(2) ./cmd/$(2)

.PHONY: build
build: go-version ## Build the static binary bin/hotreload for this machine.
	$(GOBUILD) -o bin/hotreload ./cmd/hotreload

.PHONY: build-controller
build-controller: go-version ## Build bin/hotreload-controller, the controller that nudges pods when their ConfigMaps or Secrets change.
	$(GOBUILD) -o bin/hotreload-controller ./cmd/hotreload-controller

.PHONY: build-all
build-all: go-version ## Cross-compile for every image platform into bin/linux_<arch>/ and print the sizes.
	@set -e; $(foreach p,$(PLATFORMS),$(call cross,$(p),hotreload); \
		printf '%-16s %s bytes\n' $(p) "$$(stat -c %s $(call platform-dir,$(p))/hotreload)";)

# gotestsum ends the run with the tests that were skipped, each with its
# reason, then the failures, then one line: DONE N tests[, N skipped][, N failures] in T.
.PHONY: test
test: go-version ## Run every test with the race detector; end with what was skipped and why.
	$(GO) tool gotestsum --format pkgname -- -race -count=1 ./...

# Linux distributions build Go programs as position-independent executables
# (Debian, Alpine, Fedora): the suite again in that mode, without the race
# detector, which does not support it. The end-to-end tests of cmd/hotreload
# run the PIE test binary as hotreload, so the sidecar itself runs as a PIE.
# PIE_PKGS narrows it: CI runs the packages whose tests run processes.
PIE_PKGS  ?= ./...
.PHONY: test-pie
test-pie: go-version ## Run the tests once more on binaries built with -buildmode=pie, as Linux distributions build them (PIE_PKGS: which; all by default).
	$(GO) tool gotestsum --format pkgname -- -buildmode=pie -count=1 $(PIE_PKGS)

.PHONY: e2e
e2e: ## Run the real-cluster suite (root): a single-node Kubernetes on this machine, hotreload in real pods.
	test/e2e/run.sh

.PHONY: lint
lint: go-version ## go vet, gofmt and staticcheck (the version go.mod pins), the real-cluster suite included.
	$(GO) vet -tags e2e ./...
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) tool staticcheck -tags e2e ./...

.PHONY: bench
bench: go-version ## Measure latency, reload counts, memory; print the figures.
	$(GO) test -run '^$$' -bench . -benchtime 1x -count 1 ./...

.PHONY: demo
demo: go-version ## Play the kubelet and an app on this machine, with hotreload between them.
	$(GO) run ./examples/demo

# The image's users, for a base without them (scratch). The kubelet runs a
# container whose pod sets no runAsUser as the image's uid, but the runtime
# then takes the group from the image's /etc/passwd, not from USER's gid:
# without this file hotreload ran with group 0 in a real pod (make e2e).
# Every image target depends on it.
bin/etc/passwd bin/etc/group &:
	@mkdir -p bin/etc
	printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >bin/etc/passwd
	printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >bin/etc/group

# $(call image-build,DOCKERFILE,NAME,PLATFORMS): build NAME from DOCKERFILE
# and the binaries already in bin/<os>_<arch><variant>/. One platform makes
# an image; several make a manifest list (buildah), or a multi-platform image
# (docker buildx, which needs the containerd image store to keep it). The
# build arguments are the ones the Dockerfiles declare; TARGETPLATFORM,
# TARGETOS, TARGETARCH and TARGETVARIANT come from --platform. buildah 1.28
# leaves TARGETVARIANT unset, not empty, on a platform without a variant, and
# warns of it: it gets it explicitly.
comma := ,
empty :=
space := $(empty) $(empty)
image-args = --build-arg BASE=$(BASE) --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -f $(1)
define image-build
	@set -e; case "$(IMAGE_TOOL)" in \
	docker) \
		echo "docker buildx build --platform $(subst $(space),$(comma),$(strip $(3))) $(call image-args,$(1)) -t $(2) ."; \
		docker buildx build --platform $(subst $(space),$(comma),$(strip $(3))) $(call image-args,$(1)) -t $(2) . ;; \
	buildah) \
		if [ $(words $(3)) = 1 ]; then out="-t $(2)"; else \
			if $(BUILDAH) manifest exists $(2) 2>/dev/null; then $(BUILDAH) manifest rm $(2) >/dev/null; fi; \
			$(BUILDAH) manifest create $(2) >/dev/null; out="--manifest $(2)"; \
		fi; \
		for p in $(3); do \
			variant=$${p#*/*/}; if [ "$$variant" = "$$p" ]; then variant=; fi; \
			echo "$(BUILDAH) bud --isolation chroot --platform $$p --build-arg TARGETVARIANT=$$variant $(call image-args,$(1)) $$out ."; \
			$(BUILDAH) bud --isolation chroot --platform $$p --build-arg TARGETVARIANT=$$variant $(call image-args,$(1)) $$out . ; \
		done ;; \
	*) echo "make $@ needs docker or buildah (IMAGE_TOOL=$(IMAGE_TOOL))"; exit 1 ;; \
	esac
endef

.PHONY: image
image: go-version bin/etc/passwd bin/etc/group ## Build the image for PLATFORM (default: this machine's) with docker or buildah; BASE=scratch where base images cannot be pulled.
	$(call cross,$(PLATFORM),hotreload)
	$(call image-build,Dockerfile,$(IMAGE),$(PLATFORM))

.PHONY: image-all
image-all: build-all bin/etc/passwd bin/etc/group ## Build the multi-arch image IMAGE (a manifest list of every platform of build-all) with buildah or docker buildx.
	$(call image-build,Dockerfile,$(IMAGE),$(PLATFORMS))

.PHONY: image-controller
image-controller: go-version bin/etc/passwd bin/etc/group ## Build the controller's image (Dockerfile.controller) for PLATFORM, as image does; CONTROLLER_IMAGE names it.
	$(call cross,$(PLATFORM),hotreload-controller)
	$(call image-build,Dockerfile.controller,$(CONTROLLER_IMAGE),$(PLATFORM))

.PHONY: clean
clean: ## Remove build output.
	rm -rf bin
