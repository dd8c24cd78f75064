# The image holds only the static binary that `make build-all` cross-compiled
# for the target platform (bin/linux_armv7 for arm/v7): nothing to compile here, no
# shell, no package manager. BASE defaults to distroless static (nonroot,
# UID 65532); `make image BASE=scratch` builds where base images cannot be
# pulled: the binary carries its own CA roots for HTTPS webhooks.
ARG BASE=gcr.io/distroless/static-debian12:nonroot
# TARGETPLATFORM, TARGETOS, TARGETARCH and TARGETVARIANT come from --platform
# (docker buildx and buildah set them); the Makefile passes only BASE,
# VERSION and REVISION. They have no defaults: BuildKit would take a default
# over --platform and copy the amd64 binary into every image. FROM
# --platform is what docker does anyway; buildah 1.28 warns of an automatic
# argument that no ARG takes.
ARG TARGETPLATFORM
FROM --platform=${TARGETPLATFORM} ${BASE}

ARG TARGETOS
ARG TARGETARCH
ARG TARGETVARIANT
ARG VERSION=dev
ARG REVISION=unknown

LABEL org.opencontainers.image.title="hotreload" \
      org.opencontainers.image.description="Sidecar that reloads an app when its ConfigMaps or Secrets change, by HTTP or signal, without a restart" \
      org.opencontainers.image.source="https://github.com/hotreload/hotreload" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"

# The users of distroless nonroot, for bases that have none (see the Makefile).
COPY bin/etc/passwd bin/etc/group /etc/
# In /usr/bin, not /: a pod mounts its views' volumes under /hotreload/
# (docs/design/fleet.md), which a file named /hotreload would block (runc:
# "not a directory").
COPY bin/${TARGETOS}_${TARGETARCH}${TARGETVARIANT}/hotreload /usr/bin/hotreload
USER 65532:65532
EXPOSE 9533
ENTRYPOINT ["/usr/bin/hotreload"]
