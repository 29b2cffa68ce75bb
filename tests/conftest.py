"""Shared test fixtures: where the repository, its fixtures and the external corpus live, and a
private cache directory for every test."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES_DIR = REPO_ROOT / "fixtures"
# External material lives beside the checkout (../shared/corpus), never inside it.
CORPUS_DIR = REPO_ROOT.parent / "shared" / "corpus"
# The GPU groups were recorded on an H100 (fixtures/<group>) and the same programs again on an
# H200 (fixtures/<group>_h200): the folder's suffix -> the chip (fixtures/README.md, GPU groups).
GPU_CHIPS = {"": "h100", "_h200": "h200"}


def gpu_fixtures(group: str) -> list[str]:
    """The folders of one GPU group (``gpu_kernels``, ``gpu_transformer``, …), one per chip."""
    return [group + suffix for suffix in GPU_CHIPS]


def gpu_chip(folder: str) -> str:
    """The chip a GPU fixture folder was recorded on."""
    for suffix, chip in GPU_CHIPS.items():
        if suffix and folder.endswith(suffix):
            return chip
    return GPU_CHIPS[""]


@pytest.fixture(scope="session", autouse=True)
def _private_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """profan's caches (parsed HLO, converted HloProtos) go to one temporary directory for the
    whole session, never into the user's cache; subprocesses inherit it through the
    environment.  Session-scoped so module- and session-scoped fixtures that load traces are
    covered too.  A test that needs a cache of its own sets ``PROFAN_CACHE_DIR`` again."""
    cache = tmp_path_factory.mktemp("profan-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PROFAN_CACHE_DIR", str(cache))
        yield cache


@pytest.fixture
def private_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A cache directory of the test's own, in ``PROFAN_CACHE_DIR`` for the test: not made yet
    (profan makes it), and outside ``tmp_path`` (a test may check that nothing else is written
    there).  A module whose every test wants one says
    ``pytestmark = pytest.mark.usefixtures("private_cache")``."""
    root = tmp_path_factory.mktemp("private-cache") / "cache"
    monkeypatch.setenv("PROFAN_CACHE_DIR", str(root))
    return root


# The quick loop, ``pytest -m "not slow"`` (README, Development), leaves out the tests marked
# ``slow``: whole files by their module's ``pytestmark``, single tests of otherwise quick files
# here, by file and test name (every parameter) or name[parameter] (that one).  Listed: what took
# about 1.5 s or more in a full run on 2 cores (pytest --durations=0), minus the first test of a
# file that only pays for a module fixture the next test would pay instead.
SLOW_TESTS: dict[str, tuple[str, ...]] = {
    "test_api_notebook.py": ("test_ops_frame_has_one_row_per_json_op_in_order",),
    "test_cache.py": (
        "test_module_codec_round_trips_a_large_module",
        "test_parser_tables_are_data_and_parse_as_built",
        "test_every_kind_of_entry_damaged_is_a_miss_end_to_end",
    ),
    "test_cache_safety.py": ("test_a_fifo_in_place_of_every_entry_is_a_miss_not_a_hang",),
    "test_cli_start.py": (
        "test_hlo_roofline_loads_pandas_when_it_needs_it",
        "test_json_report_loads_no_matplotlib",
    ),
    "test_cli_conventions.py": ("test_annotate_formats",),
    "test_cost_corpus.py": ("test_every_corpus_instruction_is_costed_with_its_source",),
    "test_cost_fusion_demand.py": ("test_roofline_bytes_never_exceed_xlas_on_any_module",),
    "test_cost_kernels_real.py": (
        "test_transformer_engine_attention_in_xla_benchmarks",
        "test_other_kernels_in_xla_tests",
    ),
    "test_devices_forms.py": (
        "test_iota_matches_reference_transpose",
        "test_every_corpus_form_decodes_or_fails_cleanly",
    ),
    "test_export_chrome.py": (
        "test_the_file_follows_the_trace_event_format",
        "test_counters_never_exceed_the_roofline_or_the_chip[cpu]",
        "test_a_trace_viewer_json_input_exports_its_executions",
    ),
    "test_export_xplane.py": (
        "test_xprof_trace_viewer_shows_profans_args",
        "test_a_read_only_trace_directory_works_and_is_never_written",
        "test_a_pod_read_reduced_is_a_clear_error",
    ),
    "test_gates_unknown.py": ("test_synthetic_zero_length_steps_fail_step_time_and_mfu_gates",),
    "test_hlo_inference.py": ("test_inferred_shapes_equal_xla_parser",),
    "test_hlo_names.py": ("test_synthetic_generated_computation_names_never_clash",),
    "test_hlo_parser.py": (
        "test_grammars_load_from_the_installed_package_and_from_a_checkout",
        "test_every_fixture_dump_prints_back_to_the_same_model",
    ),
    "test_hlo_shapes.py": (
        "test_every_printed_shape_prints_back_as_xla_wrote_it",
        "test_hloproto_conversion_prints_every_corpus_layout_as_xla",
    ),
    "test_hlo_views.py": ("test_every_corpus_while_loop_has_the_trip_count_its_config_records",),
    "test_memory_estimate.py": ("test_estimate_on_every_corpus_module_xla_accepts",),
    "test_names_escaping.py": (
        "test_synthetic_hostile_names_reach_the_trace",
        "test_synthetic_hostile_names_in_check_github_and_junit",
        "test_synthetic_hostile_names_in_markdown",
        "test_synthetic_hostile_names_as_text[diff]",
        "test_synthetic_hostile_names_as_text[annotate]",
        "test_synthetic_hostile_names_as_text[memory-md]",
        "test_synthetic_hostile_names_as_text[memory]",
    ),
    "test_outputs_safety.py": (
        "test_junit_to_a_full_device_is_exit_2",
        "test_stdout_on_a_full_device_is_exit_2",
        "test_a_failed_write_keeps_the_old_file",
        "test_concurrent_baseline_updates_keep_every_entry",
    ),
    "test_plots_readable.py": (
        "test_step_labels_do_not_overprint_at_100_steps",
        "test_time_axes_read_in_a_time_unit",
        "test_every_plot_has_axes_and_a_legend[transformer]",
    ),
    "test_pod_hosts.py": ("test_map_summary_equals_the_summary_of_every_event",),
    "test_process_limits.py": (
        "test_gzip_bomb_refused_fast_and_small[report-synthetic_bomb.xplane.pb]",
        "test_gunzip_limit_can_be_raised",
        "test_sigterm_ends_every_process_of_the_command",
        "test_killed_worker_is_one_line_naming_its_host",
    ),
    "test_pytest_plugin.py": ("test_checks_in_a_project",),
    "test_pytest_plugin_jax.py": (
        "test_baseline_cycle",
        "test_docs_ci_commands_work",
        "test_budget_failure_prints_the_check_lines",
    ),
    "test_remote_fail_fast.py": (
        "test_endpoint_that_never_answers_ends_at_the_timeout",
        "test_unreachable_endpoint_is_one_line_within_seconds[gs]",
        "test_file_urls_are_local_paths",
    ),
    "test_remote_storage.py": (
        "test_network_down_is_one_line_exit_2[gs]",
        "test_remote_profile_reopens_from_the_cache_without_a_download",
        "test_remote_reduced_form_reads_every_host",
        "test_remote_report_is_byte_identical_to_the_local_one[s3]",
    ),
    "test_report_page_data.py": (
        "test_synthetic_profile_without_steps_draws_as_one",
        "test_v6e_slices_are_the_trace_events",
    ),
    "test_roofline_invariants.py": ("test_no_step_runs_above_its_roofline[gpu_transformer_h200]",),
    "test_roofline_schedule.py": ("test_every_corpus_loop_body_runs_its_recorded_trip_count",),
    "test_roofline_transcendentals.py": (
        "test_tpu_v5_golden_runs_no_faster_than_the_v5p_estimate",
    ),
    "test_sharding_names.py": (
        "test_every_corpus_module_with_a_named_mesh_gets_its_names",
        "test_maxtext_mesh_names_its_only_real_axis",
    ),
    "test_steps_without_marks.py": (
        "test_one_step_over_the_whole_busy_span",
        "test_single_program_traces_keep_a_step_per_execution",
    ),
    "test_trace_command_buffers.py": ("test_same_ops_and_kernel_counts_as_without_graphs[h200]",),
    "test_trace_errors.py": ("test_cli_exit_code_two_without_traceback",),
    "test_trace_hloproto.py": ("test_fixture_modules_match_xla_dump[transformer]",),
    "test_trace_json_nohlo.py": (
        "test_check_fails_an_mfu_gate_on_a_json_alone",
        "test_the_hlo_comes_from_the_xplane_beside_the_json",
        "test_a_json_alone_prints_no_roofline_columns_and_its_unmatched_time",
        "test_a_json_alone_says_its_hlo_is_missing_in_every_format[transformer]",
    ),
    "test_trace_prefetch.py": ("test_a_report_read_ahead_is_byte_identical",),
    "test_trace_shares.py": ("test_a_big_host_is_read_in_shares_and_loads_the_same",),
    "test_trace_wire.py": (
        "test_lines_decoded_in_chunks_equal_whole_lines[transformer]",
        "test_fields_in_any_order",
        "test_bulk_decode_round_trips_random_events",
    ),
    "test_units_format.py": (
        "test_seconds_parse_back",
        "test_si_parse_back",
        "test_percent_parse_back",
        "test_report_spells_units_one_way",
        "test_chips_and_memory_spell_units_as_the_report",
    ),
    "test_whatif_chip.py": (
        "test_train_step_within_10_percent[gpu_transformer_nocb--_h200]",
        "test_train_step_within_10_percent[gpu_transformer_nocb-_h200-]",
    ),
    "test_xprof_crosscheck.py": ("test_xprof_and_profan_agree_on_tpu_v6e",),
    "test_xprof_op_profile.py": (
        "test_hlo_command_lists_and_costs_an_op_profile",
        "test_hlo_command_text_names_each_program",
    ),
}
# In a file marked slow as a whole, the tests the quick loop still runs, so that every area keeps
# a test there: one cold report per platform (CPU fixture, TPU and ROCm corpus traces), one cache
# re-open, one command-line run, the budget and findings rules.
QUICK_TESTS: dict[str, tuple[str, ...]] = {
    "test_report_numbers.py": (
        "test_fixture_report_numbers[matmul]",
        "test_tpu_trace_report",
        "test_gpu_trace_report[mi300x_jax_conv]",
    ),
    "test_cache_reopen.py": ("test_cached_outputs_are_byte_identical_to_a_cold_read[mlp]",),
    "test_cli_report.py": ("test_report_terminal_plain_when_piped",),
    "test_check_budget.py": ("test_mfu_and_exposed_comm_budgets",),
    "test_findings_ranked.py": ("test_findings_are_ranked_and_the_exposed_all_reduces_lead",),
}


def _listed(item: pytest.Item, table: dict[str, tuple[str, ...]]) -> bool:
    names = table.get(item.path.name, ())
    return item.name in names or getattr(item, "originalname", None) in names


def _slow_module(item: pytest.Item) -> pytest.Module | None:
    module = item.getparent(pytest.Module)
    return module if module and any(m.name == "slow" for m in module.own_markers) else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that reads the external corpus carries the ``corpus`` mark (so ``-m "not
    corpus"`` runs exactly the tests that need nothing outside the repository).  The tests of
    SLOW_TESTS carry ``slow``; in a module marked slow that holds a test of QUICK_TESTS, the mark
    moves from the module to each of its other tests."""
    for item in items:
        if "corpus_dir" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.corpus)
        if _listed(item, SLOW_TESTS):
            item.add_marker(pytest.mark.slow)
    kept = {id(item) for item in items if _listed(item, QUICK_TESTS)}
    for module in {id(m): m for m in map(_slow_module, items) if m}.values():
        if not any(id(i) in kept and i.getparent(pytest.Module) is module for i in items):
            continue
        module.own_markers[:] = [mark for mark in module.own_markers if mark.name != "slow"]
        for item in items:
            if item.getparent(pytest.Module) is module and id(item) not in kept:
                item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES_DIR


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """The external corpus: the one way a test reads it (tests/test_suite_rules.py), so that the
    test is marked ``corpus`` and skips when the corpus is absent."""
    if not CORPUS_DIR.is_dir():
        pytest.skip(f"external corpus not found at {CORPUS_DIR} (conformance tests need it)")
    return CORPUS_DIR


def corpus_files(folder: str, pattern: str) -> list[str]:
    """The names of the corpus files ``folder/pattern``, listed at collection (none when the corpus
    is absent), for a test that runs once per file and reads it through ``corpus_dir``."""
    return (
        sorted(p.name for p in (CORPUS_DIR / folder).glob(pattern)) if CORPUS_DIR.is_dir() else []
    )


def corpus_params(folder: str, pattern: str, *, leave_out: str = "corrupt") -> list[Any]:
    """``corpus_files`` (less the names holding ``leave_out``) as parameters marked ``corpus``:
    for a test whose other parameters need nothing outside the repository."""
    names = [name for name in corpus_files(folder, pattern) if leave_out not in name]
    return [pytest.param(name, marks=pytest.mark.corpus) for name in names]


@dataclass(frozen=True)
class InCorpus:
    """A path inside the external corpus, in a table of traces that are otherwise fixtures: its
    parameter is marked ``corpus`` (``named_params``) and ``located`` reads it through
    ``corpus_dir``."""

    relative: str


def named_params(paths: dict[str, Path | InCorpus]) -> list[Any]:
    """The keys of ``paths`` as parameters, those of a path in the corpus marked ``corpus``."""
    corpus = pytest.mark.corpus
    return [
        pytest.param(n, marks=corpus) if isinstance(p, InCorpus) else n for n, p in paths.items()
    ]


def located(request: pytest.FixtureRequest, path: Path | InCorpus) -> Path:
    """``path``, one inside the corpus through ``corpus_dir`` (which skips when it is absent)."""
    if isinstance(path, InCorpus):
        corpus: Path = request.getfixturevalue("corpus_dir")
        return corpus / path.relative
    return path


@dataclass
class HloCorpusOutcome:
    """One module of the HLO corpus (``hlo/xla``): its MANIFEST row and what ``parse_module``
    made of it (the module, or the error it raised)."""

    row: dict
    module: Any = None
    error: Exception | None = None


@pytest.fixture(scope="session")
def hlo_corpus_outcomes(corpus_dir: Path) -> list[HloCorpusOutcome]:
    """Every corpus module parsed once per session (about 10 s): the conformance and the
    verifier tests read the same outcomes."""
    import json

    from profan.hlo import parse_module

    root = corpus_dir / "hlo" / "xla"
    rows = [json.loads(line) for line in (root / "MANIFEST.jsonl").read_text().splitlines()]
    found: list[HloCorpusOutcome] = []
    for row in rows:
        text = (root / row["file"]).read_text(encoding="utf-8", errors="replace")
        try:
            found.append(HloCorpusOutcome(row, module=parse_module(text, file=row["file"])))
        except Exception as error:
            found.append(HloCorpusOutcome(row, error=error))
    return found
