#!/bin/sh
# CMAKE_ARGS for building llama-cpp-python on this machine: prints them, changes nothing.
#
#   export CMAKE_ARGS="$(sh scripts/llama_cpu_flags.sh)" && pip install -e '.[test]'
#
# Why not llama.cpp's own GGML_NATIVE: a native build segfaulted in decode on this project's
# AVX-512 hosts (llama-cpp-python 0.3.36, 2026-11-22). The portable AVX2 build that replaced it runs
# everywhere, but leaves AVX-512 unused where the CPU has it, and the prompt's evaluation (what a
# first completion waits for) is 1.46x faster with it on those hosts (142 -> 207 tokens/s, the
# embedded model on 2 cores; docs/measurements.md). So: the AVX2 baseline, plus each AVX-512
# extension this CPU reports, named one by one, and AMX where it has it. A wheel built so runs on
# this machine (and ones like it); pip builds llama-cpp-python from source on each machine, so
# each gets its own (a machine that built it before keeps pip's cached wheel: `pip install
# --no-cache-dir --force-reinstall --no-deps llama-cpp-python` with these flags rebuilds it).
# Other architectures (arm64) get no flags: llama.cpp's defaults.
set -eu
# REPOMEM_CPUINFO and REPOMEM_MACHINE stand in for /proc/cpuinfo and `uname -m` (tests).
case "${REPOMEM_MACHINE:-$(uname -m)}" in
  x86_64|amd64) ;;
  *) exit 0 ;;
esac
flags="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
cpu_flags=" $(grep -m1 '^flags' "${REPOMEM_CPUINFO:-/proc/cpuinfo}" 2>/dev/null | cut -d: -f2) "
has() { case "$cpu_flags" in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
if has avx512f && has avx512cd && has avx512bw && has avx512dq && has avx512vl; then
  flags="$flags -DGGML_AVX512=ON"
  has avx512_vnni && flags="$flags -DGGML_AVX512_VNNI=ON"
  has avx512vbmi && flags="$flags -DGGML_AVX512_VBMI=ON"
  has avx512_bf16 && flags="$flags -DGGML_AVX512_BF16=ON"
  # Intel's matrix tiles (AMX, Sapphire Rapids on): llama.cpp then multiplies 8-bit and K-quant
  # blocks in them, and reads a prompt 1.5-2.4x faster (docs/measurements.md). Its AMX code needs
  # AVX512_VNNI beside them. -fno-dse: GCC 12 (Debian 12's) drops the stores that fill the tile
  # configuration before ldtilecfg as dead, and every tile load then faults (an illegal
  # instruction), which dead-store elimination off for llama.cpp's C++ prevents.
  if has amx_tile && has amx_int8 && has avx512_vnni; then
    flags="$flags -DGGML_AMX_TILE=ON -DGGML_AMX_INT8=ON -DCMAKE_CXX_FLAGS=-fno-dse"
  fi
fi
echo "$flags"
