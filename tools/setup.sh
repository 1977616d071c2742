#!/usr/bin/env bash
# Installs what depengine needs to build, test and benchmark on Debian 12.
# As root it runs apt-get; otherwise it prints the command to run.
# Usage: tools/setup.sh [--peers]   (--peers adds the baseline runtimes)
source "$(dirname "${BASH_SOURCE[0]}")/ci/common.sh"

packages=(cmake ninja-build g++ clang libclang-rt-14-dev pkg-config
          libgtest-dev libgmock-dev libbenchmark-dev
          libopenblas-dev liblapacke-dev graphviz gnuplot nlohmann-json3-dev python3 valgrind
          spin)
if [[ "${1:-}" == "--peers" ]]; then
  packages+=(libomp-dev libstarpu-dev libtbb-dev)
fi
ensure_packages "${packages[@]}"
