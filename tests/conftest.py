import os
import subprocess

import pytest
from typer.testing import CliRunner
from web_helpers import SCREENSHOTS

from simhash_sqlite import SimhashIndex


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "index.db"


@pytest.fixture
def index(db_path):
    with SimhashIndex(db_path, create=True) as ix:
        yield ix


@pytest.fixture
def runner():
    return CliRunner()


@pytest.fixture(autouse=True)
def _no_db_env(monkeypatch):
    monkeypatch.delenv("SIMQ_DB", raising=False)


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs (root only), unmounted afterwards: a full disk for the tests of full disks."""
    if os.geteuid() != 0:
        pytest.skip("a full disk is made by mounting a small tmpfs, which needs root")
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def integrity_ok(path) -> bool:
    """SQLite's own integrity check on a file, through a separate connection."""
    import apsw

    conn = apsw.Connection(os.fspath(path))
    try:
        return conn.execute("PRAGMA integrity_check").get == "ok"
    finally:
        conn.close()


# The slow lane: whole files of processes, servers, browsers, Node and Spark, and the tests that took over
# about 3 s on the 2-core CI machine. `pytest -m "not slow" -n 2` is the fast lane for development (under two
# minutes on a quiet 2-core machine); CI runs both. A new test that starts a browser, Node, Spark or many
# processes belongs here.
SLOW_FILES = {
    "test_spark.py",
    "test_web_browser.py",
    "test_review_browser.py",
    "test_crash_and_concurrency.py",
    "test_readonly_and_damaged.py",
    "test_web_origin.py",
    "test_web_locks.py",
    "test_web_worker.py",
}
SLOW_TESTS = {
    "test_ctrl_c_during_a_large_add_leaves_a_valid_index",
    "test_a_closed_pipe_ends_quietly_and_piped_tables_do_not_wrap",
    "test_colour_only_on_a_terminal_and_never_under_no_color",
    "test_fuzz_cli_no_traceback_no_damage",
    "test_shell_completion",
    "test_a_real_file_over_32_mib_is_added_and_found_with_default_settings",
    "test_near_dash_reads_stdin_and_a_path_gets_a_hint",
    "test_two_texts_piped_in_are_two_documents",
    "test_adds_into_a_large_index_commit_more_documents_at_a_time_and_report_only_what_is_committed",
    "test_every_search_is_exact_at_every_batch_of_a_bulk_add_and_after",
    "test_fuzz_random_bytes_and_jsonl",
    "test_near_equals_brute_force_for_any_k",
    "test_an_add_killed_while_its_workers_run_leaves_no_workers_and_resumes_to_the_same_index",
    "test_jsonl_read_in_the_workers_gives_what_one_process_reads",
    "test_simq_add_and_dedup_on_two_processes_write_what_one_writes",
    "test_scan_index_and_batch_equal_brute_force_for_any_k",
    "test_densify_ranks_and_their_overflow_equal_the_definition",
    "test_sketches_of_many_rows_equal_the_definition",
    "test_kept_sketches_find_every_near_duplicate_sharing_a_window",
    "test_serve_is_read_only_and_refuses_paths_and_markup",
    "test_a_users_type_checker_reads_the_annotations",  # a cold mypy run: about 4 s of CPU
    "test_node_better_sqlite3_loads_it",  # the first run installs better-sqlite3 with npm (minutes)
    "test_the_node_example_in_sql_md_runs",
    "test_confirmed_dupes_equal_brute_force_jaccard_at_the_boundary",  # 7-20 s; near's twin stays fast
    "test_files_edited_or_gone_after_add_are_judged_by_their_sketches",
    "test_render_round_trips",  # hypothesis, 50 examples of whole renders
    "test_the_scanner_without_its_wrappers_is_json_loads",
    "test_python_dash_m_runs_the_cli",  # a cold interpreter and import
    "test_folding_whitespace_first_changes_nothing_for_any_code_point",  # 7 x 1.1M code points: about 8 s
}


# The files that hold the longest runs of the full suite (minutes of wall time on the 2-core CI machine):
# JVMs (Spark local, standalone and the user's command), the bench smoke run, emcc, pip builds of wheels.
# Longest first.
LONGEST = ["test_spark.py", "test_bench_smoke.py", "test_browser_index.py", "test_verdict.py", "test_native.py",
           "test_extension_short_texts.py", "test_extension_rule.py"]


# The heavy walks: one case of each runs in the fast lane, every case in the slow one.
SLOW_CASES = {
    "test_every_surface_gives_each_dupes_pair_the_same_verdict[gone]",
    "test_every_surface_gives_each_dupes_pair_the_same_verdict[jsonl]",
    "test_the_web_pages_give_each_dupes_pair_the_same_verdict[jsonl]",
    "test_clusters_flag_members_below_the_line_with_the_chain_that_joined_them[True]",
    "test_every_kernel_equals_the_reference_on_long_texts[avx2]",
    "test_densify_equals_its_definition[1000]",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in SLOW_FILES or item.originalname in SLOW_TESTS or item.name in SLOW_CASES:
            item.add_marker(pytest.mark.slow)
    # Handed out in this order (see pytest_xdist_make_scheduler): the longest first, then the other slow tests,
    # then the fast lane. Started early, they end before the short ones do, and the two workers finish
    # together instead of one waiting on a Spark job or a bench run that was handed out last.
    rank = {name: i for i, name in enumerate(LONGEST)}
    items.sort(key=lambda item: (item.get_closest_marker("slow") is None, rank.get(item.path.name, len(rank))))


# The files whose tests share an expensive module fixture (a Spark session, a browser, an index or a server
# built once): with -n 2 each goes to one worker whole, so that fixture is built once.
WHOLE_FILES = {
    "test_spark.py", "test_web_browser.py", "test_review_browser.py", "test_browser_index.py", "test_hosts.py",
    "test_confirm.py", "test_verdict.py", "test_extension.py", "test_extension_short_texts.py", "test_faults.py",
    "test_plots.py", "test_portability.py", "test_sql_surface.py", "test_web.py", "test_dedup_resume.py",
    "test_bounded_pairs.py", "test_web_origin.py",
}


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """With -n: each file of WHOLE_FILES is one unit of work, every other test a unit of its own; the
    units are handed out in collection order (pyproject's --no-loadscope-reorder), one at a time to
    whichever worker is free. (xdist's own loadgroup does this by xdist_group marks, but pytest 9.2 no
    longer lets it rename the tests it marks, so its groups are not kept together.)"""
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if path.rsplit("/", 1)[-1] in WHOLE_FILES else nodeid

    if config.getvalue("dist") == "load":
        return Scheduling(config, log)
    return None


def pytest_terminal_summary(terminalreporter, config):
    for folder in config.stash.get(SCREENSHOTS, []):
        terminalreporter.write_line(f"screenshots of the web pages: {folder}")
