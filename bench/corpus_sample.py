"""Loading a large JSONL corpus with a small sample: wall time and peak memory (issue 23, item 10).

Writes a JSONL corpus of --rows stories (~--words words each, every tenth one outside the word
range, every fiftieth one not prose) to a temp folder, then loads it as `endings.corpora` does
with `sample: --sample`, in a fresh child process per repeat, and reports the load's wall time,
the child's peak RSS (ru_maxrss) and how many stories keep their text.

    python bench/corpus_sample.py [--rows 20000] [--words 1700] [--sample 5] [--repeats 3] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = """
import json, resource, sys, time
sys.path.insert(0, {repo!r})
from wse_platform.endings.corpus import load_corpus
t0 = time.perf_counter()
load = load_corpus({path!r}, "big", min_words=500, max_words=5000, max_stories={sample})
dt = time.perf_counter() - t0
print(json.dumps({{"load_s": dt, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "stories": len(load.stories), "included": len(load.included),
                  "with_text": sum(1 for s in load.stories if s.text)}}))
"""


def write_corpus(path: Path, rows: int, words: int) -> int:
    sentence = "The keeper counted the boats as they passed the harbour wall at dusk, one by one. "
    per = len(sentence.split())
    with path.open("w", encoding="utf-8") as fh:
        for i in range(rows):
            n = max(2, (200 if i % 10 == 0 else words) // per)
            text = sentence * n
            if i % 50 == 7:
                text = "\x01" + text
            fh.write(json.dumps({"id": f"s{i}", "text": f"Story {i}. " + text}) + "\n")
    return path.stat().st_size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--words", type=int, default=1_700)
    ap.add_argument("--sample", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="wse-corpus-bench-") as tmp:
        path = Path(tmp) / "big.jsonl"
        size = write_corpus(path, args.rows, args.words)
        runs = []
        for _ in range(args.repeats):
            out = subprocess.run([sys.executable, "-c", CHILD.format(repo=str(REPO), path=str(path),
                                                                     sample=args.sample)],
                                 capture_output=True, text=True, check=True)
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    result = {"rows": args.rows, "file_mb": round(size / 1024 / 1024, 1), "sample": args.sample,
              "load_s_median": round(statistics.median(r["load_s"] for r in runs), 2),
              "peak_rss_mb_median": round(statistics.median(r["peak_rss_mb"] for r in runs), 1),
              "included": runs[0]["included"], "with_text": runs[0]["with_text"],
              "load_avg_1min": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(), "runs": runs}
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
