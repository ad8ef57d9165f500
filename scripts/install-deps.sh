#!/usr/bin/env bash
# install-deps.sh — installs the Debian 12 packages cnnscale builds and tests with.
# Idempotent: installs only what is missing. As a non-root user it prints the
# command to run instead. The CUDA toolkit (optional) is not a Debian package here:
# it is used when found under /usr/local/cuda.
# DEBS_TO_KEEP are downloaded (not installed) into /var/cache/cnnscale/debs for tests
# that unpack them privately (environment-modules conflicts with lmod as a package).
# TEST_PACKAGES are the references the tests cross-check against (torch, torchvision,
# h5py: Debian's builds), installed only with --tests (scripts/test.sh passes it), so
# that the runtime list stays lean. PyPI-only test peers (TensorBoard's reader, torch ≥ 2
# for a real torchrun) come from scripts/python-venv.sh.
# scripts/check-deps.sh proves both lists together cover what the build, tests and demo use.
# FUZZ_PACKAGES (--fuzz: scripts/fuzz.sh passes it) are Debian's clang 16, its libFuzzer,
# sanitizer runtimes, OpenMP and LLVM 16 (its llvm-symbolizer names the frames of a report),
# which build the fuzz targets (tests/fuzz/) under
# AddressSanitizer and UBSan.
# A third-party apt source that cannot be read (NVIDIA's CUDA repository unreachable, a
# NodeSource list with no Release file) does not stop it: apt-get update's failures are
# named in one warning and the install goes on with the lists apt has; if apt-get install
# still fails, the error line names those sources and how to disable them.
# Usage: scripts/install-deps.sh [--tests] [--fuzz]
set -euo pipefail
PACKAGES=(
  build-essential cmake pkg-config git python3
  openmpi-bin libopenmpi-dev libpmix-dev
  libhdf5-openmpi-dev hdf5-tools
  libboost-program-options-dev libboost-dev libdnnl-dev ocl-icd-opencl-dev libopenblas-dev
  libprotobuf-dev protobuf-compiler libonnx-dev
  googletest libgtest-dev nlohmann-json3-dev zlib1g-dev libgloo-dev libssl-dev
  dataset-fashion-mnist libxml2-utils shellcheck
  libjpeg62-turbo-dev libpng-dev python3-pil python3-venv
  slurm-wlm munge iproute2 util-linux
  lmod tcl
  patchelf debootstrap debian-archive-keyring
)
TEST_PACKAGES=(python3-torch python3-torchvision python3-h5py python3-numpy python3-onnx libonnx-testdata)
FUZZ_PACKAGES=(clang-16 libfuzzer-16-dev libclang-rt-16-dev libomp-16-dev llvm-16)
DEBS_TO_KEEP=(environment-modules)
WANT=("${PACKAGES[@]}")
for arg in "$@"; do
  case "$arg" in
    --tests) WANT+=("${TEST_PACKAGES[@]}") ;;
    --fuzz) WANT+=("${FUZZ_PACKAGES[@]}") ;;
    *) echo "install-deps: unknown argument '$arg' (usage: scripts/install-deps.sh [--tests] [--fuzz])" >&2; exit 2 ;;
  esac
done
DEB_CACHE=${CNNSCALE_DEB_CACHE:-/var/cache/cnnscale/debs}  # CNNSCALE_DEB_CACHE: tests/tools/install_deps.sh
UNREAD=""  # the apt sources apt-get update could not read
apt_update() {
  local log st
  log=$(mktemp)
  if apt-get update -q 2>&1 | tee "$log"; then st=0; else st=${PIPESTATUS[0]}; fi
  # `|| true`: no W:/E: line (a clean update) makes grep exit 1, which pipefail and set -e
  # would turn into a silent exit before anything is installed.
  UNREAD=$(grep -E '^(W|E): ' "$log" | grep -oE '(https?|ftp|file):/[^[:space:]]+' |
    sed -E -e "s/'\$//" -e 's#/+(InRelease|Release(\.gpg)?|dists/.*)$##' | sort -u | paste -sd ' ' || true)
  rm -f "$log"
  if [ "$st" -ne 0 ] || [ -n "$UNREAD" ]; then
    echo "install-deps: warning: apt-get update (exit $st) could not read: ${UNREAD:-see above}; going on with the package lists apt has" >&2
  fi
}
keep_debs() {
  local p
  for p in "${DEBS_TO_KEEP[@]}"; do
    ls "$DEB_CACHE/${p}"_*.deb >/dev/null 2>&1 && continue
    [ "$(id -u)" -eq 0 ] || { echo "install-deps: as root it would also download $p into $DEB_CACHE (a test unpacks it)" >&2; continue; }
    mkdir -p "$DEB_CACHE"
    (cd "$DEB_CACHE" && apt-get download -q "$p" >/dev/null 2>&1) ||
      { apt_update >/dev/null && (cd "$DEB_CACHE" && apt-get download -q "$p"); } ||
      echo "install-deps: warning: could not download $p into $DEB_CACHE; the test that needs it will skip that part" >&2
  done
}
missing=()
for p in "${WANT[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#WANT[@]} packages present"
  keep_debs
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run as root: apt-get update && apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt_update
apt-get install -y -q --no-install-recommends "${missing[@]}" || {
  echo "install-deps: error: apt-get install failed (apt's message above)${UNREAD:+; apt-get update could not read $UNREAD: if a package was not found, fix that source or disable it (rename its file in /etc/apt/sources.list.d away from .list/.sources, or add 'Enabled: no' to its paragraph) and run this again}" >&2
  exit 1
}
keep_debs
