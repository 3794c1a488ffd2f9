#!/usr/bin/env bash
# The README's first command: on a fresh Debian machine with a Rust toolchain, installs what the
# full build needs when it is missing (Open MPI, HDF5, libclang for the MPI bindings), builds dlio
# with MPI and HDF5, and runs the default workload (a small data set in a temporary folder).
# Arguments are passed to `dlio run` (e.g. `workload=unet3d_b200 ...`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

need=()
command -v mpirun >/dev/null || need+=(openmpi-bin)
for pkg in libopenmpi-dev libhdf5-dev libclang-dev pkg-config; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "== installing ${need[*]} (the build's system libraries)"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

echo "== building dlio with MPI and HDF5 (target/release/dlio, target/release/dlio_benchmark, and dlio trace's libdlio_interpose.so)"
cargo build --release --locked --features mpi,hdf5 --bin dlio --bin dlio_benchmark
cargo build --release --locked -p dlio-interpose

exec target/release/dlio run "$@"
