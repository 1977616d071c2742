#!/usr/bin/env bash
# Installs what depengine needs to build, test and benchmark on Debian 12.
# As root it runs apt-get; otherwise it prints the command to run.
# Usage: tools/setup.sh [--peers]   (--peers adds the baseline runtimes)
set -euo pipefail

packages=(cmake ninja-build g++ clang libclang-rt-14-dev pkg-config
          libgtest-dev libgmock-dev libbenchmark-dev
          libopenblas-dev liblapacke-dev graphviz gnuplot nlohmann-json3-dev)
if [[ "${1:-}" == "--peers" ]]; then
  packages+=(libomp-dev libstarpu-dev libtbb-dev)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y ${missing[*]}"
if [[ $(id -u) -eq 0 ]]; then
  echo "setup: installing ${missing[*]}"
  bash -c "$cmd" >/dev/null
else
  echo "setup: missing packages; run as root:" >&2
  echo "  $cmd" >&2
  exit 1
fi
