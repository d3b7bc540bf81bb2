#!/usr/bin/env bash
# Build the Debian package (`make deb`): build/deb/baccarat-edge_<version>_<arch>.deb.
#
#   1. stage the source (tracked files only) with systemd/debian/ as its debian/ folder;
#   2. fill a wheel cache outside the repository with every dependency (from PyPI, once);
#   3. dpkg-buildpackage -b: debian/rules makes the venv under /opt/baccarat-edge/venv with
#      Debian's /usr/bin/python3 from those wheels, and debhelper does the rest;
#   4. lintian, failing on any error or warning not overridden (with its reason) in
#      systemd/debian/baccarat-edge.lintian-overrides.
#
# Environment: ATTESTATION_KEY_FILE (required): the path of the build key, an Ed25519 PEM private
# key (openssl genpkey -algorithm ed25519 -out build.key; keep it off the tables): the package's
# manifest of its installed files is signed with it, and its public half is written beside the
# .deb (baccarat-edge_<version>_attestation.pub) for the tables' attestation.public_key_file.
# WHEELHOUSE (default ~/.cache/baccarat-edge/wheelhouse), DEB_OUT (default
# build/deb), DEB_COMPRESS (dpkg-deb -Z: zstd by default; xz for the smallest file, slowly),
# LINTIAN=0 to skip step 4, PIP_NO_INDEX=1 to build offline from a filled wheel cache.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${DEB_OUT:-$REPO/build/deb}
WHEELHOUSE=${WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/baccarat-edge/wheelhouse}
export DEB_COMPRESS=${DEB_COMPRESS:-zstd}

die() { echo "build-deb: $*" >&2; exit 1; }

for tool in dpkg-buildpackage dpkg-parsechangelog dh lintian; do
    command -v "$tool" >/dev/null || die "$tool is missing: run .ci/system-deps (apt-get install debhelper lintian)"
done
# The venv must run on Debian's interpreter, never a pyenv/conda one that happens to be first on PATH.
PYTHON=$(readlink -f /usr/bin/python3)
dpkg -S "$PYTHON" >/dev/null 2>&1 || die "$PYTHON (from /usr/bin/python3) does not belong to a Debian package"
"$PYTHON" -c 'import ensurepip, venv' 2>/dev/null || die "$PYTHON has no venv module: apt-get install python3-venv"
# The build key: its path only, from the environment (never its content on a command line).
[ -n "${ATTESTATION_KEY_FILE:-}" ] ||
    die "ATTESTATION_KEY_FILE is not set: the path of the build's Ed25519 private key (openssl genpkey -algorithm ed25519 -out build.key)"
[ -r "$ATTESTATION_KEY_FILE" ] || die "ATTESTATION_KEY_FILE: $ATTESTATION_KEY_FILE cannot be read"
ATTESTATION_KEY_FILE=$(readlink -f "$ATTESTATION_KEY_FILE")
export ATTESTATION_KEY_FILE

VERSION=$("$PYTHON" -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' \
    "$REPO/pyproject.toml")
CHANGELOG_VERSION=$(dpkg-parsechangelog -l "$REPO/systemd/debian/changelog" -S Version)
[ "$VERSION" = "$CHANGELOG_VERSION" ] ||
    die "pyproject.toml says $VERSION but systemd/debian/changelog says $CHANGELOG_VERSION: add a changelog entry (dch -v $VERSION)"

# 1. The staged source: what git tracks (plus new files not yet committed), no caches.
STAGE=$OUT/baccarat-edge-$VERSION
rm -rf "$STAGE" "$OUT/wheels"
mkdir -p "$STAGE" "$OUT/wheels" "$WHEELHOUSE"
git -C "$REPO" ls-files -z -co --exclude-standard -- pyproject.toml README.md common daemon drivers config systemd |
    (cd "$REPO" && xargs -0 -r sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh) |
    tar -C "$REPO" --null -T - -cf - | tar -C "$STAGE" -xf -
mv "$STAGE/systemd/debian" "$STAGE/debian"
# debhelper takes these from debian/<package>.<kind>; systemd/ stays the single source.
cp "$STAGE/systemd/baccarat-edge.service" "$STAGE/debian/baccarat-edge.service"
cp "$STAGE/systemd/baccarat-edge.sysusers" "$STAGE/debian/baccarat-edge.sysusers"
cp "$STAGE/systemd/baccarat-edge.tmpfiles" "$STAGE/debian/baccarat-edge.tmpfiles"

# 2. Wheels. The project's own wheel goes to a per-build folder; the cache keeps only the
# third-party wheels (immutable per name and version), so a rebuild downloads nothing new.
TOOLS=$OUT/.pip-tools
[ -x "$TOOLS/bin/pip" ] && [ "$(readlink -f "$TOOLS/bin/python")" = "$PYTHON" ] || {
    rm -rf "$TOOLS"
    "$PYTHON" -m venv "$TOOLS"
}
PIP=("$TOOLS/bin/pip" --disable-pip-version-check -q)
fill_wheelhouse() {
    "${PIP[@]}" download "$@" -d "$WHEELHOUSE" --find-links "$WHEELHOUSE" --only-binary=:all: "setuptools>=77" wheel &&
        "${PIP[@]}" wheel "$@" --no-deps -w "$OUT/wheels" --find-links "$WHEELHOUSE" "$STAGE" &&
        "${PIP[@]}" wheel "$@" -w "$WHEELHOUSE" --find-links "$WHEELHOUSE" \
            "$OUT/wheels/baccarat_edge-$VERSION-py3-none-any.whl"
}
# WHEELS_OFFLINE_FIRST=1 (the test suite): use the cached wheels when they satisfy every
# requirement, asking PyPI only when they do not; by default pip resolves against PyPI, as
# `make venv` does, and downloads only what the cache lacks.
# Two builds at once (a test run and make deb) take turns on the shared cache, until the venv
# is made from it in step 3.
exec 9>"$WHEELHOUSE/.lock"
flock 9
if [ "${WHEELS_OFFLINE_FIRST:-0}" = 1 ] && fill_wheelhouse --no-index >/dev/null 2>&1; then
    :
else
    fill_wheelhouse
fi
rm -f "$WHEELHOUSE"/baccarat_edge-*.whl

# 3. The package.
(cd "$STAGE" && WHEELHOUSE="$WHEELHOUSE" PROJECT_WHEELS="$OUT/wheels" \
    dpkg-buildpackage -b -us -uc --no-sign >"$OUT/build.log" 2>&1) ||
    { tail -40 "$OUT/build.log" >&2; die "dpkg-buildpackage failed: $OUT/build.log"; }
exec 9>&-
ARCH=$(dpkg-architecture -qDEB_HOST_ARCH)
DEB=$OUT/baccarat-edge_${VERSION}_${ARCH}.deb
[ -f "$DEB" ] || die "dpkg-buildpackage did not produce $DEB"
cp "$STAGE/debian/attestation.pub" "$OUT/baccarat-edge_${VERSION}_attestation.pub"

# 4. lintian.
if [ "${LINTIAN:-1}" != 0 ]; then
    lintian --fail-on error,warning --tag-display-limit 0 "$DEB" || die "lintian found problems in $DEB"
fi
echo "$DEB"
