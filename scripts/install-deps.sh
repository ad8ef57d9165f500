#!/usr/bin/env bash
# install-deps.sh — installs the Debian 12 packages cnnscale builds and tests with.
# Idempotent: installs only what is missing. As a non-root user it prints the
# command to run instead. The CUDA toolkit (optional) is not a Debian package here:
# it is used when found under /usr/local/cuda.
set -euo pipefail
PACKAGES=(
  build-essential cmake pkg-config git python3
  openmpi-bin libopenmpi-dev libpmix-dev
  libhdf5-openmpi-dev hdf5-tools
  libboost-program-options-dev libdnnl-dev ocl-icd-opencl-dev libopenblas-dev
  googletest libgtest-dev nlohmann-json3-dev zlib1g-dev
  dataset-fashion-mnist libxml2-utils
  slurm-wlm munge iproute2 util-linux
  lmod tcl
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run as root: apt-get update && apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
