"""scripts/llama_cpu_flags.sh, which the README's install and .ci/run build llama-cpp-python with:
the portable AVX2 baseline everywhere on x86-64, AVX-512 and each extension only where the CPU
lists every instruction set the flag compiles for, and llama.cpp's own defaults elsewhere."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "llama_cpu_flags.sh"
BASELINE = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
AVX2_CPU = "fpu sse sse2 ssse3 sse4_1 sse4_2 avx f16c fma avx2 bmi2"
# The flags line of this project's AMD EPYC hosts (abridged to what matters).
AVX512_CPU = (f"{AVX2_CPU} avx512f avx512dq avx512ifma avx512cd avx512bw avx512vl avx512_bf16 avx512vbmi "
              "avx512_vbmi2 avx512_vnni avx512_bitalg avx512_vpopcntdq")


def _flags(tmp_path: Path, cpu_flags: str, machine: str = "x86_64") -> list[str]:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {cpu_flags}\n\nprocessor\t: 1\nflags\t\t: {cpu_flags}\n")
    env = {**os.environ, "REPOMEM_CPUINFO": str(cpuinfo), "REPOMEM_MACHINE": machine}
    result = subprocess.run(["sh", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=30)
    assert result.returncode == 0 and not result.stderr, result.stderr
    return result.stdout.split()


def test_an_avx2_cpu_gets_the_portable_build(tmp_path: Path):
    assert _flags(tmp_path, AVX2_CPU) == BASELINE.split()


def test_an_avx512_cpu_gets_each_extension_it_lists(tmp_path: Path):
    assert _flags(tmp_path, AVX512_CPU) == [*BASELINE.split(), "-DGGML_AVX512=ON", "-DGGML_AVX512_VNNI=ON",
                                            "-DGGML_AVX512_VBMI=ON", "-DGGML_AVX512_BF16=ON"]
    without_bf16 = AVX512_CPU.replace(" avx512_bf16", "")
    assert "-DGGML_AVX512_BF16=ON" not in _flags(tmp_path, without_bf16)
    assert "-DGGML_AVX512_VNNI=ON" in _flags(tmp_path, without_bf16)


def test_avx512_needs_every_set_its_flag_compiles_for(tmp_path: Path):
    """GGML_AVX512 compiles with -mavx512f, cd, vl, dq and bw: a CPU lacking one (Knights Landing
    has no bw, dq or vl) keeps the AVX2 build, extensions included."""
    for missing in ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"):
        assert _flags(tmp_path, AVX512_CPU.replace(f" {missing} ", " ")) == BASELINE.split(), missing


def test_other_architectures_get_llama_cpps_defaults(tmp_path: Path):
    assert _flags(tmp_path, "fp asimd", machine="aarch64") == []


def test_the_install_and_ci_build_with_the_script():
    """The README's first command and .ci/run take CMAKE_ARGS from the script, so the two cannot
    drift apart (they did once: the README lacked -DGGML_AVX=ON)."""
    root = SCRIPT.parents[1]
    first_command = (root / "README.md").read_text(encoding="utf-8").split("```bash\n", 1)[1].split("\n", 1)[0]
    assert first_command.startswith('export CMAKE_ARGS="$(sh scripts/llama_cpu_flags.sh)" && ')
    assert '$(sh scripts/llama_cpu_flags.sh)' in (root / ".ci" / "run").read_text(encoding="utf-8")


# The flags line of this project's Intel Xeon hosts (Sapphire Rapids class), abridged.
AMX_CPU = f"{AVX512_CPU} avx512_fp16 amx_bf16 amx_tile amx_int8"


def test_an_amx_cpu_also_gets_llama_cpps_tile_kernels(tmp_path: Path):
    """AMX where the CPU lists its tiles and 8-bit products (and AVX512_VNNI, which llama.cpp's AMX
    code is compiled with), with dead-store elimination off for GCC 12 (see the script)."""
    amx = ["-DGGML_AMX_TILE=ON", "-DGGML_AMX_INT8=ON", "-DCMAKE_CXX_FLAGS=-fno-dse"]
    assert _flags(tmp_path, AMX_CPU)[-3:] == amx
    for missing in ("amx_tile", "amx_int8", "avx512_vnni"):
        flags = _flags(tmp_path, AMX_CPU.replace(f" {missing}", ""))
        assert not set(amx) & set(flags), missing
    assert not set(amx) & set(_flags(tmp_path, "fpu sse avx avx2 fma f16c amx_tile amx_int8"))  # no AVX-512
