"""Generate cairn_client/_generated/ from docs/openapi.json, or check it.

    python generate.py           # regenerate the committed code
    python generate.py --check   # exit 1, with a diff, if it is out of date

Runs openapi-python-client (pinned in requirements/generator.txt, with the
settings of generator.yaml) into a temporary directory, refuses any
generator warning (a warning means part of the API was left out), then
either replaces cairn_client/_generated/ or compares it file by file.
Needs the generator and ruff on the PATH of this interpreter's environment.
"""

from __future__ import annotations

import difflib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOC = HERE.parent.parent / "docs" / "openapi.json"
CONFIG = HERE / "generator.yaml"
TARGET = HERE / "cairn_client" / "_generated"
WARNINGS = ("warning", "will not be generated", "unable to process")


def say(text: str) -> None:
    print(f"generate: {text}", file=sys.stderr)


def generate(into: Path) -> None:
    """Runs the generator into `into` (which must not exist)."""
    bindir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
    cmd = [str(bindir / "openapi-python-client"), "generate", "--path", str(DOC),
           "--output-path", str(into), "--config", str(CONFIG), "--meta", "none"]
    done = subprocess.run(cmd, env=env, cwd=into.parent, capture_output=True, text=True)
    log = done.stdout + done.stderr
    if done.returncode != 0 or any(w in log.lower() for w in WARNINGS):
        sys.stderr.write(log)
        raise SystemExit("generate: FAILED: openapi-python-client failed or warned (above)")


def files(root: Path) -> dict[str, str]:
    """Every generated file under `root`, by relative path (no caches)."""
    return {
        str(p.relative_to(root)): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def differences(want: dict[str, str], have: dict[str, str]) -> list[str]:
    """A unified diff (committed -> generated) of every file that differs."""
    out: list[str] = []
    for name in sorted(want.keys() | have.keys()):
        a, b = have.get(name, ""), want.get(name, "")
        if a != b:
            out += difflib.unified_diff(a.splitlines(True), b.splitlines(True),
                                        f"committed/{name}", f"generated/{name}")
    return out


def main(argv: list[str]) -> int:
    check = argv[1:] == ["--check"]
    if argv[1:] not in ([], ["--check"]):
        raise SystemExit(__doc__)
    with tempfile.TemporaryDirectory(prefix="cairn-client-gen.") as tmp:
        fresh = Path(tmp) / "_generated"
        generate(fresh)
        if check:
            diff = differences(files(fresh), files(TARGET) if TARGET.exists() else {})
            if diff:
                sys.stderr.writelines(diff[:400])
                say("FAILED: cairn_client/_generated/ differs from what docs/openapi.json "
                    "generates; run `python clients/python/generate.py` and commit it")
                return 1
            count = len(files(fresh))
            say(f"ok: cairn_client/_generated/ matches docs/openapi.json ({count} files)")
            return 0
        shutil.rmtree(TARGET, ignore_errors=True)
        shutil.copytree(fresh, TARGET)
        say(f"wrote {TARGET.relative_to(HERE)} ({len(files(fresh))} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
