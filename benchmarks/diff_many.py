"""Benchmark: N changed blueprints of a pull request, one `fleetform diff --base` call against N calls
of `fleetform diff REV:path path` (issue 19, "Also").

    python benchmarks/diff_many.py [--runs N] [--blueprints N]

A git repository made for the run holds N copies of the reference blueprint (AWS: the Pulumi
program runs under the mocks on both sides of each) at `main`; the working tree changes each one
(6 -> 7 training nodes). Per round, interleaved: the one call for all N, and the N calls one after
the other (their CPU and wall times summed). Both produce the same diffs: the benchmark checks
that every section of the one call equals the diff of its own call before timing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import FLEETFORM, ROOT, Sample, header, median, run, spread  # noqa: E402


def make_repo(where: Path, count: int) -> list[str]:
    reference = (ROOT / "blueprints/reference.yaml").read_text()
    (where / "blueprints").mkdir(parents=True)
    paths = []
    for i in range(count):
        path = f"blueprints/bp{i}.yaml"
        (where / path).write_text(reference.replace("name: llm-70b ", f"name: llm-70b-{i} ", 1))
        paths.append(path)
    git = ["git", "-C", str(where), "-c", "user.email=bench@example.com", "-c", "user.name=bench"]
    subprocess.run(git[:3] + ["init", "-q", "-b", "main"], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "base"], check=True)
    for path in paths:
        text = (where / path).read_text()
        if "nodes: 6 " not in text:
            raise SystemExit("the reference blueprint no longer has `nodes: 6 `: update benchmarks/diff_many.py")
        (where / path).write_text(text.replace("nodes: 6 ", "nodes: 7 ", 1))
    return paths


def in_repo(command: list[str], repo: Path) -> list[str]:
    """`command` run from the repository (harness.run starts processes at the checkout's top)."""
    return ["sh", "-c", 'cd "$0" && exec "$@"', str(repo), *command]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--blueprints", type=int, default=4)
    args = parser.parse_args()
    header(f"diff of {args.blueprints} changed blueprints: one call against one call each", args.runs)
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        paths = make_repo(repo, args.blueprints)
        # fleetform from this checkout whatever the folder: its top first on sys.path
        ff = [FLEETFORM[0], "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
                                  "from fleetform.cli import run; run()"]
        one = in_repo(ff + ["diff", "--base", "main", *paths, "--format", "json", "--detailed-exitcode"], repo)
        each = [in_repo(ff + ["diff", f"main:{p}", p, "--format", "json"], repo) for p in paths]
        _, out = run(one, capture=True, ok=(2,))  # the warm-up, and the check that both give the same
        sections = {s["blueprint"]: s for s in json.loads(out)["blueprints"]}
        for path, command in zip(paths, each, strict=True):
            _, alone = run(command, capture=True)
            if sections[path]["status"] != "changed" or sections[path]["diff"] != json.loads(alone):
                raise SystemExit(f"{path}: the one call's section differs from its own diff")
        together, apart = [], []
        for _ in range(args.runs):
            together.append(run(one, ok=(2,))[0])
            samples = [run(command)[0] for command in each]
            apart.append(Sample(sum(s.cpu for s in samples), sum(s.wall for s in samples),
                                max(s.rss_mib for s in samples)))
    print(f"\n{'':>28}  {'CPU':>24}  {'wall':>24}  {'peak RSS':>9}")
    for name, got in ((f"one call, {args.blueprints} blueprints", together),
                      (f"{args.blueprints} calls, one each", apart)):
        print(f"{name:>28}  {spread(got, scale=1, unit='s'):>24}  {spread(got, 'wall', scale=1, unit='s'):>24}  "
              f"{median(got, 'rss_mib'):>5.0f} MiB")
    print(f"\none call / {args.blueprints} calls: {median(together) / median(apart):.2f}x CPU, "
          f"{median(together, 'wall') / median(apart, 'wall'):.2f}x wall (peak RSS: the largest process)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
