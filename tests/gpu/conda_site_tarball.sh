#!/usr/bin/env bash
# The files of a pointops .conda package as a .tar.gz, for tests/gpu/open_proofs.sh: the GPU host
# may lack zstd, and the unpacked CUDA package (about 85 MB) does not fit a device call's carry.
#
#   tests/gpu/conda_site_tarball.sh PACKAGE.conda OUT.tar.gz
#
# The tarball holds the package's own paths unchanged (site-packages/pointops/..., as CEP 20's
# python packages lay them out).
set -euo pipefail
PKG=$(readlink -f "${1:?usage: conda_site_tarball.sh PACKAGE.conda OUT.tar.gz}")
OUT_TGZ=${2:?usage: conda_site_tarball.sh PACKAGE.conda OUT.tar.gz}
[ $# -eq 2 ] || { echo "usage: conda_site_tarball.sh PACKAGE.conda OUT.tar.gz (got $# arguments)" >&2; exit 2; }
case "$OUT_TGZ" in
  *.tar.gz | *.tgz) ;;
  *) echo "conda_site_tarball.sh: OUT must end in .tar.gz or .tgz, got $OUT_TGZ (a glob that matched twice?)" >&2; exit 2 ;;
esac
command -v zstd > /dev/null || { echo "conda_site_tarball.sh: needs zstd (the .conda's inner tarballs are zstd)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && unzip -q "$PKG" 'pkg-*.tar.zst')
mkdir "$work/files"
zstd -dc "$work"/pkg-*.tar.zst | tar -x -C "$work/files"
[ -f "$work/files/site-packages/pointops/__init__.py" ] ||
  { echo "conda_site_tarball.sh: $PKG holds no site-packages/pointops" >&2; exit 1; }
tar czf "$OUT_TGZ" -C "$work/files" .
echo "$OUT_TGZ: $(du -h "$OUT_TGZ" | cut -f1) from $(basename "$PKG")"
