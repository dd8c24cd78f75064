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
# test/support/binary builds with the same flags.
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
# helm and cyclonedx-gomod are built from the Go module proxy into a cache
# outside the clone (tools/go-install.sh), not added to go.mod: helm's
# dependencies would move the Kubernetes modules the controller links.
HELM_VERSION      := v4.3.1
CYCLONEDX_VERSION := v1.10.0
HELM_INSTALL      := tools/go-install.sh helm helm.sh/helm/v4/cmd/helm $(HELM_VERSION) '-X helm.sh/helm/v4/internal/version.version=$(HELM_VERSION)'
CYCLONEDX_INSTALL := tools/go-install.sh cyclonedx-gomod github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod $(CYCLONEDX_VERSION)
# Where the cached helm is (or will be): make test puts it on PATH for the
# chart's tests, without building it.
HELM_DIR          := $(dir $(shell tools/go-install.sh --path helm $(HELM_VERSION)))
CHART             := charts/hotreload

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

.PHONY: build-all-controller
build-all-controller: go-version ## Cross-compile the controller for every image platform into bin/linux_<arch>/ and print the sizes.
	@set -e; $(foreach p,$(PLATFORMS),$(call cross,$(p),hotreload-controller); \
		printf '%-16s %s bytes\n' $(p) "$$(stat -c %s $(call platform-dir,$(p))/hotreload-controller)";)

# gotestsum ends the run with the tests that were skipped, each with its
# reason, then the failures, then one line: DONE N tests[, N skipped][, N failures] in T.
.PHONY: test
test: go-version ## Run every test with the race detector; end with what was skipped and why.
	PATH="$(HELM_DIR):$$PATH" $(GO) tool gotestsum --format pkgname -- -race -count=1 ./...

# Linux distributions build Go programs as position-independent executables
# (Debian, Alpine, Fedora): the suite again in that mode, without the race
# detector, which does not support it. The end-to-end tests of cmd/hotreload
# run the PIE test binary as hotreload, so the sidecar itself runs as a PIE.
# PIE_PKGS narrows it: CI runs the packages whose tests run processes.
PIE_PKGS  ?= ./...
.PHONY: test-pie
test-pie: go-version ## Run the tests once more on binaries built with -buildmode=pie, as Linux distributions build them (PIE_PKGS: which; all by default).
	PATH="$(HELM_DIR):$$PATH" $(GO) tool gotestsum --format pkgname -- -buildmode=pie -count=1 $(PIE_PKGS)

.PHONY: e2e
e2e: ## Run the real-cluster suite (root): a single-node Kubernetes on this machine, hotreload in real pods.
	PATH="$(HELM_DIR):$$PATH" test/e2e/run.sh

# make compare: hotreload's restart mode and stakater Reloader side by side on
# the same Deployment in make e2e's cluster (test/e2e/compare_test.go; docs/
# restart.md). Opt-in, not in CI's make e2e: it takes minutes and needs the
# peer's binary, which tools/peer-reloader.sh finds or builds outside the
# clone (HOTRELOAD_PEER_RELOADER names one).
.PHONY: compare
compare: ## Compare restart mode with stakater Reloader in make e2e's cluster (root; HOTRELOAD_PEER_RELOADER: its binary) and print the table.
	@bin=$$(tools/peer-reloader.sh | tail -n 1) && \
	HOTRELOAD_PEER_RELOADER="$$bin" E2E_TAGS=e2e,compare E2E_RUN='^TestCompareReloader$$' PATH="$(HELM_DIR):$$PATH" test/e2e/run.sh

# make compare-memory: make e2e's TestSidecarMemory with configmap-reload's
# pods beside hotreload's, in the same run (test/e2e/compare_test.go,
# TestCompareMemory; docs/performance.md). configmap-reload is not on the Go
# module proxy: HOTRELOAD_PEER_CONFIGMAP_RELOAD names a binary built from its
# public source (default: $(PEERS)/configmap-reload, as make bench reads it).
PEERS ?= $(or $(HOTRELOAD_PEERS_CACHE),/var/cache/hotreload-peers)
HOTRELOAD_PEER_CONFIGMAP_RELOAD ?= $(PEERS)/configmap-reload
.PHONY: compare-memory
compare-memory: ## Print hotreload's and configmap-reload's memory in real pods, idle and scraped, in make e2e's cluster (root; HOTRELOAD_PEER_CONFIGMAP_RELOAD: its binary).
	@[ -x "$(HOTRELOAD_PEER_CONFIGMAP_RELOAD)" ] || { echo "make compare-memory: HOTRELOAD_PEER_CONFIGMAP_RELOAD=$(HOTRELOAD_PEER_CONFIGMAP_RELOAD) is not an executable file: build configmap-reload from its public source (github.com/jimmidyson/configmap-reload) and name it"; exit 1; }
	HOTRELOAD_PEER_CONFIGMAP_RELOAD="$(HOTRELOAD_PEER_CONFIGMAP_RELOAD)" E2E_TAGS=e2e,compare E2E_RUN='^TestCompareMemory$$' PATH="$(HELM_DIR):$$PATH" test/e2e/run.sh

.PHONY: lint
lint: go-version ## go vet, gofmt and staticcheck (the version go.mod pins), the real-cluster suite and make compare's test included.
	$(GO) vet -tags e2e,compare ./...
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) tool staticcheck -tags e2e,compare ./...

.PHONY: chart-lint
chart-lint: ## helm lint --strict and helm template of charts/hotreload, with the default values and each of its ci/*-values.yaml.
	@set -e; helm=$$($(HELM_INSTALL)); \
	for f in "" $(CHART)/ci/*-values.yaml; do \
		echo "helm lint --strict $(CHART)$${f:+ -f $$f}; helm template"; \
		out=$$($$helm lint --strict $(CHART) $${f:+-f "$$f"} 2>&1) || { echo "$$out"; exit 1; }; \
		out=$$($$helm template hotreload $(CHART) --namespace hotreload-system $${f:+-f "$$f"} 2>&1 >/dev/null) || { echo "$$out"; exit 1; }; \
	done

.PHONY: manifests
manifests: go-version ## Regenerate what is made from the chart: deploy/'s kustomize base and monitoring component, and the chart README's values table.
	@helm=$$($(HELM_INSTALL)); PATH="$$(dirname $$helm):$$PATH" $(GO) test -count=1 -run '^TestGenerated$$' ./deploy -update
	$(GO) test -count=1 -run '^TestValuesTable$$' ./charts -update

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

# $(call image-build,DOCKERFILE,NAME,PLATFORMS[,list]): build NAME from
# DOCKERFILE and the binaries already in bin/<os>_<arch><variant>/. One
# platform makes an image, unless the fourth argument asks for a manifest
# list; several make a manifest list (buildah), or a multi-platform image
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
		if [ $(words $(3)) = 1 ] && [ -z "$(4)" ]; then out="-t $(2)"; else \
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

.PHONY: image-all-controller
image-all-controller: build-all-controller bin/etc/passwd bin/etc/group ## Build the controller's multi-arch image CONTROLLER_IMAGE, as image-all does.
	$(call image-build,Dockerfile.controller,$(CONTROLLER_IMAGE),$(PLATFORMS))

.PHONY: image-controller
image-controller: go-version bin/etc/passwd bin/etc/group ## Build the controller's image (Dockerfile.controller) for PLATFORM, as image does; CONTROLLER_IMAGE names it.
	$(call cross,$(PLATFORM),hotreload-controller)
	$(call image-build,Dockerfile.controller,$(CONTROLLER_IMAGE),$(PLATFORM))

# The names the chart and the examples give the images: the release's.
RELEASE_IMAGE            = $(REGISTRY)/hotreload:$(CHART_APP_VERSION)
RELEASE_CONTROLLER_IMAGE = $(REGISTRY)/hotreload-controller:$(CHART_APP_VERSION)

.PHONY: image-archives
image-archives: ## Build both images for PLATFORM under the names the chart uses and save them as bin/hotreload.tar and bin/hotreload-controller.tar, for kind load image-archive or ctr images import.
	$(MAKE) --no-print-directory image IMAGE=$(RELEASE_IMAGE)
	$(MAKE) --no-print-directory image-controller CONTROLLER_IMAGE=$(RELEASE_CONTROLLER_IMAGE)
	@set -e; for i in hotreload:$(RELEASE_IMAGE) hotreload-controller:$(RELEASE_CONTROLLER_IMAGE); do \
		f=bin/$${i%%:*}.tar; img=$${i#*:}; rm -f $$f; \
		case "$(IMAGE_TOOL)" in \
		docker) docker save -o $$f $$img ;; \
		*) $(BUILDAH) push -q $$img docker-archive:$$f:$$img >/dev/null ;; \
		esac; \
		echo "$$f: $$img"; \
	done

# A release: both commands for RELEASE_PLATFORMS, as files in dist/ and as
# one manifest list per image, with checksums and an SBOM per binary. The
# release workflow (.github/workflows/release.yml) runs make release-check,
# make release and make release-publish on a tag.
DIST              ?= dist
RELEASE_PLATFORMS ?= $(PLATFORMS)
REGISTRY          ?= ghcr.io/hotreload
COMMANDS          := hotreload hotreload-controller
CHART_VERSION      = $(shell awk '$$1 == "version:" {print $$2; exit}' $(CHART)/Chart.yaml)
CHART_APP_VERSION  = $(shell awk '$$1 == "appVersion:" {print $$2; exit}' $(CHART)/Chart.yaml)
# dist/<command>-<version>-<os>-<arch><variant>, as the platform names it.
dist-file = $(DIST)/$(2)-$(VERSION)-$(subst /,-,$(patsubst %/v7,%v7,$(1)))

.PHONY: release
release: IMAGE_TOOL = buildah
# Its own image storage, removed at the end: the images leave only as the
# archives in dist/, and the machine's storage does not grow by a release
# (330 MB for every platform) at each run.
release: BUILDAH = buildah --storage-driver vfs --root $(abspath $(DIST))/.buildah/root --runroot $(abspath $(DIST))/.buildah/run
release: go-version bin/etc/passwd bin/etc/group ## Build a release into dist/: both binaries for RELEASE_PLATFORMS, their images as manifest lists (OCI archives), SHA256SUMS, CycloneDX SBOMs and the chart.
	@command -v buildah >/dev/null || { echo "make release needs buildah (apt-get install buildah)"; exit 1; }
	rm -rf $(DIST) && mkdir -p $(DIST)
	@set -e; $(foreach p,$(RELEASE_PLATFORMS),$(foreach c,$(COMMANDS),\
		echo "build $(c) for $(p)"; $(call cross,$(p),$(c)); cp $(call platform-dir,$(p))/$(c) $(call dist-file,$(p),$(c));))
	$(call image-build,Dockerfile,$(REGISTRY)/hotreload:$(VERSION),$(RELEASE_PLATFORMS),list)
	$(call image-build,Dockerfile.controller,$(REGISTRY)/hotreload-controller:$(VERSION),$(RELEASE_PLATFORMS),list)
	@set -e; for c in $(COMMANDS); do \
		echo "$(BUILDAH) manifest push --all $(REGISTRY)/$$c:$(VERSION) oci-archive:$(DIST)/$$c-$(VERSION).oci.tar"; \
		$(BUILDAH) manifest push --all --quiet $(REGISTRY)/$$c:$(VERSION) oci-archive:$(DIST)/$$c-$(VERSION).oci.tar:$(VERSION); \
	done
	@# Rootless, the storage holds files of the user namespace's ids.
	if [ "$$(id -u)" = 0 ]; then rm -rf $(DIST)/.buildah; else $(BUILDAH) unshare rm -rf $(abspath $(DIST))/.buildah; fi
	@set -e; sbom=$$($(CYCLONEDX_INSTALL)); \
	for f in $(foreach p,$(RELEASE_PLATFORMS),$(foreach c,$(COMMANDS),$(call dist-file,$(p),$(c)))); do \
		echo "cyclonedx-gomod bin $$f"; \
		$$sbom bin -json -noserial -notimestamp -version $(VERSION) -output $$f.cdx.json $$f; \
	done
	@helm=$$($(HELM_INSTALL)); $$helm package $(CHART) --destination $(DIST)
	cd $(DIST) && sha256sum $$(ls | grep -v -e '\.oci\.tar$$' -e '^SHA256SUMS$$') >SHA256SUMS
	@ls -l $(DIST)

.PHONY: release-check
release-check: ## Check that VERSION (a release tag, vX.Y.Z) is the chart's appVersion and v + its version.
	@case "$(VERSION)" in v[0-9]*.[0-9]*.[0-9]*) ;; *) echo "VERSION $(VERSION): not a release tag vX.Y.Z"; exit 1 ;; esac
	@if [ "$(CHART_APP_VERSION)" != "$(VERSION)" ] || [ "v$(CHART_VERSION)" != "$(VERSION)" ]; then \
		echo "$(CHART)/Chart.yaml: version $(CHART_VERSION), appVersion $(CHART_APP_VERSION); the tag $(VERSION) needs $(patsubst v%,%,$(VERSION)) and $(VERSION)"; exit 1; \
	fi

.PHONY: release-publish
release-publish: ## Push dist/'s manifest lists to REGISTRY/hotreload and REGISTRY/hotreload-controller and the chart to oci://REGISTRY/charts (needs skopeo; logs in as REGISTRY_USER with REGISTRY_PASSWORD when set).
	@command -v skopeo >/dev/null || { echo "make release-publish needs skopeo"; exit 1; }
	@helm=$$($(HELM_INSTALL)); host=$(firstword $(subst /, ,$(REGISTRY))); \
	if [ -n "$$REGISTRY_USER" ]; then \
		printenv REGISTRY_PASSWORD | skopeo login --username "$$REGISTRY_USER" --password-stdin "$$host"; \
		printenv REGISTRY_PASSWORD | $$helm registry login --username "$$REGISTRY_USER" --password-stdin "$$host"; \
	fi
	@set -e; for c in $(COMMANDS); do \
		echo "skopeo copy --all oci-archive:$(DIST)/$$c-$(VERSION).oci.tar docker://$(REGISTRY)/$$c:$(VERSION)"; \
		skopeo copy --all --quiet oci-archive:$(DIST)/$$c-$(VERSION).oci.tar docker://$(REGISTRY)/$$c:$(VERSION); \
	done
	@helm=$$($(HELM_INSTALL)); $$helm push $(DIST)/hotreload-$(CHART_VERSION).tgz oci://$(REGISTRY)/charts

.PHONY: clean
clean: ## Remove build output.
	rm -rf bin $(DIST)
