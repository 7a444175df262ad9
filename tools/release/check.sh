#!/usr/bin/env bash
# check.sh verifies a release that build.sh made in dist/VERSION/, as a
# user would take it: the checksums hold; every archive holds both
# binaries, LICENSE, README.md and CHANGELOG.md; this machine's linux
# binary says its version and commit; the OCI archive loads into buildah
# with its labels; the SBOMs are CycloneDX; the packaged chart renders; the
# SDK tarball installs into a scratch npm project outside the repository
# and, run by Node against the release's own corral, joins, publishes and
# reads back (e2e/package.test.mjs on the release's artifacts).
# `make release-check` (part of `make ci`) runs it after a build.
#
# Usage: VERSION=x.y.z tools/release/check.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

version="${VERSION:?set VERSION=x.y.z}"
GO="${GO:-go}" NPM="${NPM:-npm}" BUILDAH="${BUILDAH:-buildah}"
dir="dist/$version"
commit="$(git rev-parse HEAD)"
git diff --quiet HEAD -- || commit="$commit-dirty"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
start=$SECONDS
step() { echo "release-check $version: [$((SECONDS - start))s] $*" >&2; }
fail() { echo "release-check: $*" >&2; exit 1; }

step "checksums"
(cd "$dir" && sha256sum --quiet --strict -c SHA256SUMS) || fail "SHA256SUMS does not match $dir"
listed="$(cut -d' ' -f3- "$dir/SHA256SUMS" | sort)"
present="$(cd "$dir" && ls | grep -vx SHA256SUMS | sort)"
[ "$listed" = "$present" ] || fail "SHA256SUMS lists:\n$listed\nbut $dir holds:\n$present"

step "archives"
for platform in linux_amd64 linux_arm64 darwin_amd64 darwin_arm64; do
  name="corral_${version}_${platform}"
  got="$(tar -tzf "$dir/$name.tar.gz" | sort | tr '\n' ' ')"
  want="$name/ $name/CHANGELOG.md $name/LICENSE $name/README.md $name/corral $name/corral-bench "
  [ "$got" = "$want" ] || fail "$name.tar.gz holds: $got; want: $want"
done
hostarch="$("$GO" env GOARCH)"
tar -xzf "$dir/corral_${version}_linux_${hostarch}.tar.gz" -C "$work"
bin="$work/corral_${version}_linux_${hostarch}/corral"
got="$("$bin" version)"
want="corral $version (commit $commit"
[[ "$got" == "$want"* ]] || fail "corral version printed '$got', want it to start with '$want'"
step "corral version: $got"

step "image: load the OCI archive"
tag="localhost/corral:${version//+/_}"
"$BUILDAH" rmi -f "$tag" >/dev/null 2>&1 || true
"$BUILDAH" pull --quiet "oci-archive:$dir/corral_${version}_linux_${hostarch}.oci.tar" >/dev/null
labels="$("$BUILDAH" inspect --type image --format '{{range $k, $v := .OCIv1.Config.Labels}}{{$k}}={{$v}} {{end}}' "$tag")"
for want in "org.opencontainers.image.version=$version" "org.opencontainers.image.revision=$commit" \
  org.opencontainers.image.licenses=Apache-2.0 org.opencontainers.image.source=https://github.com/corral-rt/corral; do
  [[ " $labels" == *" $want "* ]] || fail "image $tag: no label $want in: $labels"
done
"$BUILDAH" rmi "$tag" >/dev/null

step "SBOMs"
for cmd in corral corral-bench; do
  node -e '
    const bom = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    const names = (bom.components ?? []).map((c) => c.name);
    if (bom.bomFormat !== "CycloneDX" || !names.includes("connectrpc.com/connect/v2"))
      throw new Error(`${process.argv[1]}: not a CycloneDX BOM naming connectrpc.com/connect/v2`);
  ' "$dir/${cmd}_${version}.cdx.json"
done

step "Helm chart: lint and render the package with every example values file"
chart="$dir/corral-${version}.tgz"
# The chart needs values (an auth secret at least): the repository's
# examples, as make helm-check renders them from the source folder.
for v in deploy/helm/examples/*.yaml; do
  GO="$GO" tools/gotool.sh helm lint --strict --quiet "$chart" -f "$v" >/dev/null
  GO="$GO" tools/gotool.sh helm template corral "$chart" -f "$v" --namespace corral >/dev/null
done

step "browser SDK: install the tarball in a scratch project, run it against the release's corral"
sdk="$(cd "$dir" && ls corral-rt-client-*.tgz)"
(cd e2e && CORRAL_SDK_TARBALL="$PWD/../$dir/$sdk" CORRAL_BIN="$bin" NPM="$NPM" \
  node --test --test-reporter=dot package.test.mjs) || fail "the SDK tarball did not work (above)"
step "ok: $dir"
