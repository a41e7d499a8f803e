"""Every flag of every command, for every --method, with and without --plan: either it reaches
the estimator (its parameter or its plan() argument holds the given value) or the command
refuses it with a usage error (exit 2) that names it. Nothing is silently dropped.

The table is built from the parsers themselves, so a flag added later is audited too.
Command-level flags (``CLI_DESTS``: --output, --json, --progress, --plan, ...) do not reach an
estimator; each is honoured by a test named in ``CLI_FLAG_TESTS``.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import itertools

import pytest

from dpdist.cli import covariance, norm, pca, second_moment
from dpdist.cli._flags import CLI_DESTS, RUN_ONLY_DESTS, option
from dpdist.cli.main import build_parser, main
from dpdist.exceptions import ValidationError

COMMANDS = {"covariance": covariance, "pca": pca, "norm": norm, "second-moment": second_moment}

#: Where each command-level flag is shown to be honoured (test module::test).
CLI_FLAG_TESTS = {
    "input": "test_cli.py::test_covariance_round_trip",
    "method": "test_cli.py::test_baselines_from_the_cli",
    "output": "test_cli.py::test_covariance_round_trip",
    "overwrite": "test_errors.py::test_output_is_checked_before_anything_is_read",
    "json": "test_errors.py::test_json_on_every_command",
    "progress": "test_progress.py::test_progress_line_at_a_terminal_and_flags",
    "plan": "test_cli.py::test_plan_reads_metadata_only",
    "n_samples": "test_pca_cli.py::test_plan_reads_no_data",
    "n_features": "test_pca_cli.py::test_plan_reads_no_data",
    "target_sin2": "test_pca_cli.py::test_plan_reads_no_data",
    "report_delta": "test_flags.py::test_report_delta_is_honoured",
    "debug": "test_errors.py::test_unexpected_errors_are_one_line_with_a_hint",
    "missing_chunks": "test_errors.py::test_missing_chunks_follow_the_public_record_not_the_listing",
    "columns": "../data/test_formats.py::test_columns_select_named_columns_in_order",
    "ledger": "test_ledger_paths.py::test_pca_second_moment_and_norm_are_charged",
    "no_ledger": "test_ledger_paths.py::test_a_budget_in_the_default_ledger_refuses_an_unconfigured_run",
    "timeout": "test_runtime_config.py::test_timeout_flag_sets_the_dask_config_around_the_fit",
}


@functools.lru_cache(maxsize=None)
def _root() -> argparse.ArgumentParser:
    return build_parser()


def _parser(command: str) -> argparse.ArgumentParser:
    sub = next(a for a in _root()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


def _flags(command: str) -> list[argparse.Action]:
    return [a for a in _parser(command)._actions
            if a.option_strings and a.dest not in ("help", "debug") and a.dest != argparse.SUPPRESS]


def _methods(module) -> dict:
    return getattr(module, "METHODS", None) or {None: module.METHOD}


def _default(cls, dest):
    p = inspect.signature(cls.__init__).parameters.get(dest)
    return None if p is None else p.default


def _sample(action: argparse.Action, cls) -> tuple[list[str], object]:
    """argv for the flag and the value it should arrive with: never the estimator's default."""
    flag = action.option_strings[0]
    if action.nargs == 0:  # store_true / store_false
        return [flag], action.const
    if action.choices:
        value = next(c for c in action.choices if c != _default(cls, action.dest))
        return [flag, str(value)], value
    if action.dest == "timeout":  # seconds, parsed by the flag's own type
        return [flag, "37"], 37.0
    if action.dest == "mean":  # a vector, parsed by the flag's own type
        return [f"{flag}=0.37,-1"], [0.37, -1.0]
    value = {int: 7, float: 0.37}.get(action.type, "synchronous" if action.dest == "scheduler" else "x")
    assert value != _default(cls, action.dest)
    return [flag, str(value)], value


#: Values for the flags a method requires (so the flag under test is the only variable).
BASE = {"k": "2", "epsilon": "1", "delta": "1e-6", "gap": "0.5", "sigma": "1.5", "radius": "3", "rho": "1", "m": "20"}


def _cases():
    for command, module in COMMANDS.items():
        for (method, spec), plan, action in itertools.product(_methods(module).items(), (False, True), _flags(command)):
            if action.dest in ("method", "plan") or (action.dest in CLI_DESTS):
                continue
            yield pytest.param(command, method, spec, plan, action.dest,
                               id=f"{command}-{method or ''}-{'plan' if plan else 'fit'}-{action.dest}")


class _Stop(Exception):
    pass


@pytest.mark.parametrize("command,method,spec,plan,dest", list(_cases()))
def test_every_estimator_flag_reaches_the_estimator_or_is_refused(monkeypatch, command, method, spec, plan, dest):
    module = COMMANDS[command]
    action = next(a for a in _flags(command) if a.dest == dest)
    cls = spec.load()
    flag_argv, value = _sample(action, cls)
    argv = [command] + (["--method", method] if method else [])
    for req in spec.required:
        if req != dest:
            argv += [option(req), BASE[req]]
    argv += ["--plan", "--n-samples", "1000", "--n-features", "50"] if plan else ["in.zarr", "--output", "out.zarr"]
    argv += flag_argv
    args = _root().parse_args(argv)

    seen = {}
    real_call = module.estimator_call

    def spy(a, methods):
        seen["call"] = real_call(a, methods)
        return seen["call"]

    def stop(*_a, **_k):
        raise _Stop

    monkeypatch.setattr(module, "estimator_call", spy)
    monkeypatch.setattr(module, "fit_and_write", stop)
    monkeypatch.setattr(module, "input_shape", stop)
    try:
        module.run(args)
    except ValidationError as exc:
        refused_flag = option(dest) in str(exc) and "not used by" in str(exc)
        assert refused_flag or (plan and not hasattr(cls, "plan") and "--plan is not available" in str(exc)), \
            f"unexpected refusal: {exc}"
        return
    except _Stop:
        pass
    call = seen["call"]
    if plan and dest in RUN_ONLY_DESTS:
        pytest.fail(f"{option(dest)} was accepted with --plan, which runs nothing")
    param = spec.params.get(dest, dest)  # the estimator's name for what the flag sets
    if param in call.kwargs:
        est = call.build()
        assert getattr(est, param) == value, f"{option(dest)} did not reach {cls.__name__}.{param}"
    else:
        assert plan and call.plan_kwargs.get(dest) == value, f"{option(dest)} was accepted but dropped"


def test_every_command_level_flag_has_a_test():
    dests = {a.dest for command in COMMANDS for a in _flags(command) if a.dest in CLI_DESTS}
    assert dests <= set(CLI_FLAG_TESTS), sorted(dests - set(CLI_FLAG_TESTS))


@pytest.mark.parametrize("argv,flag", [
    # flags the audit found dropped (the three are tested below and above)
    (["covariance", "x.zarr", "--method", "thresholded", "--epsilon", "1", "--output", "o"], "--epsilon"),
    (["covariance", "x.zarr", "--method", "wang-xu", "--k", "3", "--epsilon", "1", "--delta", "1e-6",
      "--output", "o"], "--k"),
    (["pca", "x.zarr", "--method", "expmech", "--k", "2", "--epsilon", "1", "--delta", "1e-6", "--tau", "1",
      "--output", "o"], "--tau"),
    (["second-moment", "x.zarr", "--method", "subsample-aggregate", "--epsilon", "1", "--delta", "1e-6", "--m", "5",
      "--psd", "--output", "o"], "--psd"),
    (["covariance", "--plan", "--n-samples", "100", "--n-features", "5", "--k", "1", "--epsilon", "1",
      "--delta", "1e-6", "--sigma", "1", "--output", "o"], "--output"),
    (["covariance", "x.zarr", "--k", "1", "--epsilon", "1", "--delta", "1e-6", "--sigma", "1", "--n-samples", "5",
      "--output", "o"], "--n-samples"),
    (["second-moment", "x.zarr", "--method", "subsample-aggregate", "--epsilon", "1", "--delta", "1e-6", "--m", "5",
      "--report-delta", "1e-5", "--output", "o"], "--report-delta"),
    (["generate", "g.zarr", "--model", "2", "--structure", "block"], "--structure"),
])
def test_unused_flags_are_refused_before_anything_runs(tmp_path, monkeypatch, capsys, argv, flag):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert flag in err and "not used by" in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_privpca_on_nonfinite_is_never_dropped(tmp_path, monkeypatch, capsys):
    """`pca --method privpca --on-nonfinite` was silently dropped: it is refused while SparsePCA
    has no on_nonfinite parameter, and reaches it once it has one."""
    import dpdist

    monkeypatch.chdir(tmp_path)
    argv = ["pca", "--method", "privpca", "--k", "2", "--epsilon", "1", "--delta", "1e-6", "--gap", "0.5",
            "--sigma", "1", "--on-nonfinite", "zero"]
    args = _root().parse_args([*argv, "x.zarr", "--output", "o"])
    if "on_nonfinite" in inspect.signature(dpdist.SparsePCA.__init__).parameters:
        assert pca.estimator_call(args, pca.METHODS).build().on_nonfinite == "zero"
    else:
        assert main([*argv, "x.zarr", "--output", "o"]) == 2
        assert "--on-nonfinite is not used by `dpdist pca --method privpca`" in capsys.readouterr().err


def test_norm_takes_beta_and_privpca_takes_beta(monkeypatch):
    """`norm` had no --beta and `pca --method privpca` dropped it."""
    for argv, cls_name in ((["norm", "x.zarr"], "SpectralNorm"), (["pca", "x.zarr", "--method", "privpca"], "SparsePCA")):
        args = build_parser().parse_args(argv + ["--k", "2", "--epsilon", "1", "--delta", "1e-6", "--gap", "0.5",
                                                 "--sigma", "1", "--beta", "0.2", "--output", "o"])
        module = norm if argv[0] == "norm" else pca
        call = module.estimator_call(args, getattr(module, "METHODS", None) or module.METHOD)
        est = call.build()
        assert type(est).__name__ == cls_name and est.beta == 0.2


def test_report_delta_is_honoured(tmp_path, capsys):
    from dpdist.data.second_moment_generators import anisotropic_gaussian, to_zarr

    store = tmp_path / "x.zarr"
    to_zarr(anisotropic_gaussian(4_000, random_state=1, chunk_rows=2_000), store)
    base = ["second-moment", str(store), "--rho", "1", "--m", "20", "--radius", "5000", "--lambda-min", "0.5",
            "--random-state", "3", "--scheduler", "synchronous"]
    assert main(base + ["--report-delta", "1e-9", "--output", str(tmp_path / "a.zarr")]) == 0
    from dpdist.privacy.zcdp import ZCDP

    eps = ZCDP(1.0).to_approx_dp(1e-9)
    assert f"({eps:.4g}, 1e-09)-DP (Bun-Steinke)" in capsys.readouterr().out
    assert main(base + ["--report-delta", "2", "--output", str(tmp_path / "b.zarr")]) == 2
    assert "--report-delta" in capsys.readouterr().err and not (tmp_path / "b.zarr").exists()
