#!/usr/bin/env bash
# Installs everything DeepInfer needs to build, run and test, on Debian 12 as root.
# Idempotent: when everything is present it prints nothing and exits 0.
# Debian packages through apt; Python test tools (pip) into the project's own .venv.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libpcre2-dev libxxhash-dev libboost1.74-dev libomp-dev
  clang libfuzzer-14-dev
  libucx-dev ucx-utils openmpi-bin libopenmpi-dev iproute2 nftables
  python3 python3-venv python3-pip
)

missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Python tools for end-to-end tests, reference checks and benchmarks (see requirements.txt).
if [[ ! -x .venv/bin/python ]]; then
  echo "setup: creating .venv"
  python3 -m venv .venv
fi
stamp=.venv/.requirements.sha
want=$(sha256sum requirements.txt | cut -d' ' -f1)
if [[ "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  echo "setup: installing Python packages from requirements.txt"
  .venv/bin/pip install -q --disable-pip-version-check -r requirements.txt
  echo "$want" > "$stamp"
fi
