"""The CPU class the probes' explain verdicts were measured on (explain_e2e.py, explain_diag.py and
explain-e2e.sh read it): the CPU libraries (ATen, MKL, oneDNN) pick their GEMM and softmax kernels by
vendor and ISA, so the bits of the frameworks' CPU runs, and which models reproduce them, are facts of a
class of CPUs, not of the code.

    amd-avx512   AuthenticAMD with avx512f, avx2, fma (an AMD EPYC, measured 2026-11)
    intel-amx    GenuineIntel with avx512f, avx2, fma, avx512_fp16 and amx_tile (a Sapphire Rapids class
                 Xeon, measured 2026-12-04)
    None         any other CPU: the verdicts are printed as notes, not checked

`python3 cpu_class.py` prints the class (or "none").
"""


def cpu_info():
    vendor, flags = "", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("vendor_id") and not vendor:
                    vendor = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return vendor, flags


def cpu_class():
    vendor, flags = cpu_info()
    if not {"avx512f", "avx2", "fma"} <= flags:
        return None
    if vendor == "AuthenticAMD":
        return "amd-avx512"
    if vendor == "GenuineIntel" and {"avx512_fp16", "amx_tile"} <= flags:
        return "intel-amx"
    return None


if __name__ == "__main__":
    print(cpu_class() or "none")
