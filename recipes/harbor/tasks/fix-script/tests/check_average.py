"""Runs /app/average.py on files it has never seen; exits 0 when every mean is right."""

import subprocess
import sys
import tempfile

CASES = [[1, 2, 3, 4, 5], [10], [2.5, 3.5], [-4, 4, 9]]


def run(values):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("".join(f"{v}\n" for v in values))
    out = subprocess.run([sys.executable, "/app/average.py", f.name], capture_output=True, text=True, timeout=10)
    return out.stdout.strip(), out.stderr.strip()


failed = 0
for values in CASES:
    expected = sum(values) / len(values)
    got, err = run(values)
    try:
        ok = abs(float(got) - expected) < 1e-9
    except ValueError:
        ok = False
    print(f"{'PASS' if ok else 'FAIL'}: mean of {values} = {expected}, script printed {got or err[-200:]!r}")
    failed += not ok
sys.exit(1 if failed else 0)
