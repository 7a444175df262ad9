#!/usr/bin/env bash
# build.sh builds a release of the checked-out commit into dist/VERSION/:
#   corral_V_OS_ARCH.tar.gz      corral and corral-bench for linux and darwin
#                                on amd64 and arm64, with LICENSE, README.md
#                                and CHANGELOG.md
#   corral_V.cdx.json,           CycloneDX SBOMs of the two binaries
#   corral-bench_V.cdx.json      (cyclonedx-gomod, pinned in tools/sbom)
#   corral_V_linux_ARCH.oci.tar  the container image (this machine's arch)
#                                as an OCI archive, with OCI labels
#   corral-rt-client-X.tgz       the browser SDK, packed (npm pack) from a
#                                copy of clients/js's committed files
#   corral-V.tgz                 the Helm chart (helm package)
#   SHA256SUMS                   of all of the above
# `make release VERSION=x.y.z` runs it; check.sh verifies what it built.
# Each step prints a line as it starts, so none is silent for long.
#
# Usage: VERSION=x.y.z tools/release/build.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

version="${VERSION:?set VERSION=x.y.z (semantic, without the v)}"
# semver.org's grammar, less the v: 1.2.3, 1.2.3-rc.1, 1.2.3+build.5.
semver='^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$'
[[ "$version" =~ $semver ]] || { echo "release: VERSION=$version is not a semantic version (x.y.z)" >&2; exit 2; }

GO="${GO:-go}" NPM="${NPM:-npm}" BUILDAH="${BUILDAH:-buildah}"
commit="$(git rev-parse HEAD)"
git diff --quiet HEAD -- || commit="$commit-dirty"
# Archives and the image carry the commit's time, not the build's.
epoch="$(git log -1 --format=%ct)"
out="dist/$version"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
start=$SECONDS
step() { echo "release $version: [$((SECONDS - start))s] $*" >&2; }
# quietly runs a command, printing a line every 20 s while it runs (a cold
# cross-compile of corral took 80 s here) and its output if it fails.
quietly() {
  local t0=$SECONDS next=20 pid
  "$@" >"$work/log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if [ $((SECONDS - t0)) -ge "$next" ] && kill -0 "$pid" 2>/dev/null; then
      step "  still running: $* ($((SECONDS - t0))s)"
      next=$((next + 20))
    fi
  done
  wait "$pid" || { cat "$work/log" >&2; echo "release: failed: $*" >&2; exit 1; }
}

rm -rf "$out" && mkdir -p "$out"
bi=github.com/corral-rt/corral/internal/buildinfo
ldflags="-s -w -X $bi.version=$version -X $bi.commit=$commit"

for platform in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64; do
  os="${platform%/*}" arch="${platform#*/}"
  name="corral_${version}_${os}_${arch}"
  mkdir -p "$work/$name"
  for cmd in corral corral-bench; do
    step "go build $cmd for $os/$arch"
    quietly env CGO_ENABLED=0 GOOS="$os" GOARCH="$arch" "$GO" build -trimpath -ldflags="$ldflags" \
      -o "$work/$name/$cmd" "./cmd/$cmd"
  done
  cp LICENSE README.md CHANGELOG.md "$work/$name/"
  tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
    -C "$work" -cf - "$name" | gzip -n -9 >"$out/$name.tar.gz"
done

# From the linux/amd64 binaries' embedded build information: the modules
# linked in, at the versions linked. (cyclonedx-gomod's source mode wants
# the version from a git tag; its license detection would fetch this
# module at a version no proxy has yet, so licenses are left out.)
for cmd in corral corral-bench; do
  step "SBOM of $cmd (CycloneDX)"
  quietly env GO="$GO" tools/gotool.sh sbom bin -json -std -version "v$version" \
    -output "$out/${cmd}_${version}.cdx.json" "$work/corral_${version}_linux_amd64/$cmd"
done

hostarch="$("$GO" env GOARCH)"
step "image for linux/$hostarch ($BUILDAH)"
ctx="$work/image"
mkdir -p "$ctx"
cp "$work/corral_${version}_linux_${hostarch}/corral" deploy/image/passwd deploy/image/group "$ctx/"
cp /etc/ssl/certs/ca-certificates.crt "$ctx/"
tag="localhost/corral:$version"
# A build tag (x.y.z+meta) is not a valid image tag: + becomes _ (Helm's
# convention too).
tag="${tag//+/_}"
"$BUILDAH" build --quiet -f Dockerfile --timestamp "$epoch" \
  --label org.opencontainers.image.version="$version" \
  --label org.opencontainers.image.revision="$commit" \
  --label org.opencontainers.image.source=https://github.com/corral-rt/corral \
  --label org.opencontainers.image.licenses=Apache-2.0 \
  --label org.opencontainers.image.title=corral \
  -t "$tag" "$ctx" >/dev/null
quietly "$BUILDAH" push --quiet "$tag" "oci-archive:$out/corral_${version}_linux_${hostarch}.oci.tar:$tag"

# From a copy of the committed files, without node_modules or dist: what a
# fresh clone's `npm pack` does (prepack installs the build tools itself).
step "browser SDK (npm pack of clients/js as committed)"
mkdir -p "$work/src"
git ls-files -z clients/js | tar --null -T - -cf - | tar -x -C "$work/src"
dest="$PWD/$out"
(cd "$work/src/clients/js" && quietly "$NPM" pack --pack-destination "$dest")

step "Helm chart (helm package)"
quietly env GO="$GO" tools/gotool.sh helm package deploy/helm/corral --version "$version" \
  --app-version "$version" -d "$out"

(cd "$out" && sha256sum -- * >SHA256SUMS)
step "done: $out"
ls -l "$out" >&2
