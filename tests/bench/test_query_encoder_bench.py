"""bench/query_encoder.py in its smallest shape: every OpenMP setting, idle and shared, one row each."""


def test_the_query_encoder_bench_times_each_openmp_setting_idle_and_beside_busy_processes(capsys):
    from bench import query_encoder

    assert query_encoder.main(["--queries", "4", "--busy", "1", "--models", "use"]) == 0

    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| use |")]
    assert [row.split("|")[2].strip() for row in rows] == list(query_encoder.SETTINGS)
    for row in rows:
        idle, shared = (cell.strip().split(" / ") for cell in row.split("|")[3:5])
        assert all(float(value) > 0 for value in (*idle, *shared))
