"""What every comparison script in bench/ shares: where the model and drift are, what machine
and commit a result came from, and the median (min-max) summary of repeated rounds."""
import os
import platform
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DRIFT = os.path.join(ROOT, "build", "bin", "drift")


def default_model():
    cache = os.environ.get("DRIFT_CACHE", os.path.expanduser("~/.cache/drift"))
    return os.path.join(cache, "SmolLM2-135M-Instruct.Q4_1.gguf")


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def drift_commit():
    return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()


def summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def fmt_summary(s, digits=1):
    return f"{s['median']:.{digits}f} ({s['min']:.{digits}f}-{s['max']:.{digits}f})"


def percentile(values, p):
    """The p-th percentile (0-100), interpolating between closest ranks (numpy's default)."""
    values = sorted(values)
    if not values:
        return float("nan")
    rank = p / 100 * (len(values) - 1)
    lo = int(rank)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (rank - lo)


def add_common_args(parser, llama=True):
    """The options every comparison script takes: the llama.cpp build (when it runs one), drift's
    binary, the model, the thread count and the number of rounds."""
    if llama:
        parser.add_argument("--llama-bin", default=os.environ.get("LLAMA_CPP_BIN"),
                            help="directory of an existing llama.cpp build (or LLAMA_CPP_BIN)")
    parser.add_argument("--drift", default=DRIFT)
    parser.add_argument("-m", "--model", default=default_model())
    parser.add_argument("-t", "--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)


def add_reference_args(parser, ik_args="-rtr 1"):
    """The references a kernel benchmark runs beside drift: ik_llama.cpp's build and its options,
    and the ISA drift is forced to (DRIFT_ISA), so that an AVX2 row is drift's AVX2 kernels
    against references built for AVX2 only."""
    parser.add_argument("--ik-llama-bin", default=os.environ.get("IK_LLAMA_BIN"),
                        help="directory of an existing ik_llama.cpp build (or IK_LLAMA_BIN)")
    # -rtr: ik_llama.cpp repacks quantized rows into its interleaved layouts at load, the
    # setting its README recommends for CPU speed; the comparison is with its best. (llama-bench
    # takes `-rtr 1`, the other programs a bare `-rtr`.)
    parser.add_argument("--ik-args", default=ik_args,
                        help="extra options of ik_llama.cpp's programs (default: %(default)s)")
    parser.add_argument("--isa", default=os.environ.get("DRIFT_ISA"),
                        help="force drift's kernels (DRIFT_ISA: avx2, avx512, ...)")


def references(args):
    """[(name, build directory, extra options)] of the references given; exits when none is."""
    refs = []
    if args.llama_bin:
        refs.append(("llama.cpp", args.llama_bin, []))
    if getattr(args, "ik_llama_bin", None):
        refs.append(("ik_llama.cpp", args.ik_llama_bin, args.ik_args.split()))
    if not refs:
        raise SystemExit("give a reference build: --llama-bin (LLAMA_CPP_BIN) and/or "
                         "--ik-llama-bin (IK_LLAMA_BIN)")
    return refs


def drift_env(args):
    """drift's environment, with DRIFT_ISA set when --isa forces its kernels."""
    env = dict(os.environ)
    if getattr(args, "isa", None):
        env["DRIFT_ISA"] = args.isa
    return env
