"""``--help`` of every command: defaults shown once, every generate flag explained, required
flags marked, the positional arguments named as the errors name them."""

from __future__ import annotations

import argparse

import pytest

from dpdist.cli.main import build_parser, main


def _parsers():
    """(name, parser) of every command and sub-command."""
    todo = [("dpdist", build_parser())]
    while todo:
        name, parser = todo.pop()
        yield name, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo.extend((f"{name} {sub}", p) for sub, p in action.choices.items())


PARSERS = dict(_parsers())


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_defaults_are_said_once(name):
    parser = PARSERS[name]
    text = parser.format_help()
    assert "(default: None)" not in text
    formatter = parser._get_formatter()
    for action in parser._actions:
        help_ = action.help or ""
        if "default" in help_.lower() and help_ != argparse.SUPPRESS:
            # a help that states its default in prose gets no "(default: ...)" appended
            assert formatter._get_help_string(action) == help_, (name, action.dest)


def test_every_generate_flag_has_help_and_a_default():
    parser = PARSERS["dpdist generate"]
    formatter = parser._get_formatter()
    for action in parser._actions:
        if not action.option_strings or action.dest in ("help", "debug"):
            continue
        shown = formatter._get_help_string(action) or ""
        assert action.help, action.dest
        switch = isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction))
        assert switch or "default" in shown.lower(), (action.dest, shown)
    assert "seed of the covariance and samples (default: 0)" in " ".join(parser.format_help().split())


@pytest.mark.parametrize(("command", "flag", "mark"), [
    ("covariance", "--k", "(required by --method privcov)"),
    ("covariance", "--epsilon", "(required by --method privcov, wang-xu)"),
    ("pca", "--radius", "(required by --method analyze-gauss)"),
    ("norm", "--gap", "(required)"),
    ("second-moment", "--m", "(required)"),
    ("second-moment", "--rho", "(required by --method recursive)"),
])
def test_required_flags_are_marked(command, flag, mark):
    parser = PARSERS[f"dpdist {command}"]
    action = next(a for a in parser._actions if flag in a.option_strings)
    assert action.help.endswith(mark)


@pytest.mark.parametrize(("argv", "named"), [
    (["covariance", "--k", "2", "--epsilon", "1", "--delta", "1e-6", "--sigma", "1", "--output", "o.zarr"], "INPUT"),
    (["generate"], "OUTPUT"),
])
def test_a_missing_positional_is_named_as_in_the_usage(capsys, argv, named):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert named in err
    usage = PARSERS[f"dpdist {argv[0]}"].format_usage()
    assert named in usage and named.lower() not in usage.replace("--output OUTPUT", "")
