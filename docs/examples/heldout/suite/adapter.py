"""The operator's adapter for held-out expected outputs (docs/heldout.md).

Reads one {"id", "input": {"function", "args"}} JSON line per case on stdin, calls that function
of the package named on the command line (the workspace is the current directory) with the
arguments, and prints one {"id", "output"} JSON line per case. A case whose call raises, or
whose result is not JSON, answers {"error": ...}: it fails that case, not the run. What the code
under test prints goes to stderr, so it cannot break the answer lines.
"""

import importlib
import json
import sys

answers = sys.stdout
sys.stdout = sys.stderr  # the code under test prints to stderr
sys.path.insert(0, ".")
package = importlib.import_module(sys.argv[1])

for line in sys.stdin:
    case = json.loads(line)
    call = case["input"]
    try:
        line = json.dumps({"id": case["id"], "output": getattr(package, call["function"])(
            *call["args"])})
    except Exception as error:  # noqa: BLE001 - any failure, or an answer that is not JSON
        line = json.dumps({"id": case["id"], "output": {"error": type(error).__name__}})
    answers.write(line + "\n")
answers.flush()
