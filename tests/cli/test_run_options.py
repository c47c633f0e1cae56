"""Each of `vlmocr run`'s options is a settings field, once: the parsed options become RunConfig's
fields by one mapping (cli/run_cmd.run_settings, which `vlmocr slurm` checks jobs with too), and
every field of RunConfig is an option — so a new option cannot be parsed and then dropped, nor a
field be settable only through a config file."""

from __future__ import annotations

import typer

from vlmocr.cli import app
from vlmocr.cli.run_cmd import run_settings
from vlmocr.settings.config import RunConfig

# Options that are not settings of the reading: the config file they are read from, and where
# `--serve` starts its server (a choice of the command, not recorded in run.json).
NOT_SETTINGS = {"config", "target"}


class Given:
    """A value no option has: found again where the mapping puts it."""


def test_every_run_option_is_one_settings_field_and_every_field_an_option():
    params = typer.main.get_command(app).commands["run"].params  # type: ignore[attr-defined]
    fields_set = set()
    for param in params:
        given = Given()
        settings = run_settings({param.name: [given] if param.name == "paths" else given})
        keys = [k for k, v in settings.items() if v is given or (isinstance(v, list) and given in v)]
        if param.name in NOT_SETTINGS:
            assert keys == [], param.name
            continue
        assert len(keys) == 1 and keys[0] in RunConfig.model_fields, (param.name, keys)
        fields_set.add(keys[0])
    assert fields_set == set(RunConfig.model_fields), set(RunConfig.model_fields) ^ fields_set
    assert set(run_settings({})) == set(RunConfig.model_fields)
