"""Defaults live in EngineConfig only: the Python package's engine options and every `drift`
command's flags show the same defaults, read from it (runtime/engine_options.h). A literal written
into one of them that disagrees fails here."""
import re
import subprocess

from conftest import DRIFT_BIN

# Flags whose default every command that has them shares (generate and chat set --parallel 1 on
# purpose: they run one prompt at a time).
FLAGS = {"threads": "-t,--threads", "parallel": "--parallel", "page_size": "--page-size",
         "kv_cache_dtype": "--kv-cache-dtype", "batch_tokens": "--batch-tokens",
         "max_queued": "--max-queued", "admission": "--admission", "policy": "--policy",
         "spec": "--spec", "spec_pool_mib": "--spec-pool-mib", "spec_max_draft": "--spec-max-draft",
         "kv_ram_fraction": "--kv-ram-fraction"}
COMMANDS = ["serve", "generate", "chat", "batched-bench", "bench", "perplexity", "bench-prefix"]


def help_defaults(command: str) -> dict[str, str]:
    """Each flag's default as `drift COMMAND --help` prints it ("--page-size INT ...=16")."""
    text = subprocess.run([DRIFT_BIN, command, "--help"], capture_output=True, text=True,
                          check=True, timeout=60).stdout
    found = {}
    for key, flag in FLAGS.items():
        match = re.search(r"^\s+" + re.escape(flag) + r" [^=\n]*=(\S+)", text, re.MULTILINE)
        if match:
            found[key] = match.group(1)
    return found


def test_every_command_and_the_python_package_show_engine_configs_defaults():
    from drift import _drift

    defaults = _drift.engine_option_defaults()
    assert set(FLAGS) <= set(defaults), defaults
    serve = help_defaults("serve")
    assert set(serve) == set(FLAGS), serve
    for key, shown in serve.items():
        assert shown == str(defaults[key]) or float(shown) == defaults[key], (key, shown)
    compared = 0
    for command in COMMANDS[1:]:
        for key, shown in help_defaults(command).items():
            if command in ("generate", "chat") and key == "parallel":
                assert shown == "1", (command, shown)
                continue
            assert shown == serve[key], (command, key, shown, serve[key])
            compared += 1
    assert compared >= 20, compared  # the threads and KV dtype of bench and perplexity among them
