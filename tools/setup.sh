#!/usr/bin/env bash
# Installs what depengine needs to build, test and benchmark on Debian 12.
# As root it runs apt-get; otherwise it prints the command to run.
# Usage: tools/setup.sh [--peers]   (--peers adds the baseline runtimes)
source "$(dirname "${BASH_SOURCE[0]}")/ci/common.sh"

packages=("${SETUP_PACKAGES[@]}")
if [[ "${1:-}" == "--peers" ]]; then
  packages+=(libomp-dev libstarpu-dev libtbb-dev)
fi
ensure_packages "${packages[@]}"
