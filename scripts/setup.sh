#!/usr/bin/env bash
# Installs every Debian package SNIP Workbench needs (build, run, test, bench).
# Idempotent and non-interactive; run as root (or with sudo available).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  qt6-base-dev qt6-charts-dev qt6-svg-dev libqt6opengl6-dev libgl-dev
  libglpk-dev libopenblas-dev libeigen3-dev libsqlite3-dev sqlite3
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev
  libsentencepiece-dev libboost-math-dev
  xvfb xauth fonts-dejavu-core
  zlib1g-dev python3-numpy python3-torch
  libyaml-cpp-dev python3-yaml  # plans for Megatron-LM: its YAML read back (snip import --from megatron), and read as Megatron does in tests
  protobuf-compiler python3-protobuf python3-crc32c  # tests: TensorBoard event files decoded by protobuf's own Python runtime, CRC-32C checked
  python3-matplotlib  # experiments/plot_regimes.py: error bars and categorical axes the Qt chart lacks
  clang-format
  universal-ctags  # tests: scripts/long_functions.sh finds functions longer than 80 lines
  slurmctld slurmd slurm-client munge  # tests/slurm: a one-node Slurm cluster for snip compare --executor slurm
  qemu-user  # tests/emulated: the suite's subset on an emulated CPU without AVX-512 (qemu-x86_64 -cpu Haswell)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages already installed"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
