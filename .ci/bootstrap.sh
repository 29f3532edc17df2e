#!/bin/sh
# Set up a fresh Debian 12 machine (as root) and configure distmgr:
# install the Debian packages that are missing, generate configure, and
# configure into a build folder (BUILD_DIR, default _build). Extra arguments
# go to configure (e.g. --without-cuda).
set -eu
cd "$(dirname "$0")/.."
PACKAGES="gcc g++ make autoconf automake libtool pkg-config libopenmpi-dev openmpi-bin libucx-dev libcunit1-dev
          libfftw3-dev libfftw3-mpi-dev iproute2 libopenblas-dev libjansson-dev
          libpmix-dev slurmctld slurmd slurm-client munge
          libhdf5-openmpi-dev libpng-dev gnuplot-nox
          mpich libmpich-dev libhdf5-mpich-dev
          python3-torch libgloo-dev"
missing=
for p in $PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "bootstrap: installing$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends $missing >/dev/null
fi
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt configure ]; then ./autogen.sh >/dev/null 2>&1; fi
BUILD_DIR=${BUILD_DIR:-_build}
mkdir -p "$BUILD_DIR"
cd "$BUILD_DIR"
../configure "$@" | sed -n '/distmgr .* configured:/,$p'
