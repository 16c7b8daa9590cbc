"""Suite-defined benchmarks (``benchmarks[].define``): files in every supported format become the same Records; bad
data, mappings and templates are one ``ConfigError`` line naming the file, the row and the fix."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from omnieval import ConfigError, SuiteConfig, load_suite
from omnieval._plan import builtin_specs, iter_records
from omnieval.cli import main
from omnieval.core import ImageContent, Record

ROOT = Path(__file__).resolve().parents[3]
CUSTOM = ROOT / "examples" / "custom"

ROWS = [
    {"qid": f"q{i}", "q": f"Which option is number {i}?", "opts": [f"opt{j}" for j in range(4)], "gold": f"opt{i % 4}"}
    for i in range(6)
]

SUITE = """
name: byo
models:
  - name: m
    source: {{kind: path, path: /x.gguf}}
benchmarks:
  - name: mine
    define:
{define}
"""


def suite(tmp_path: Path, define: str) -> Path:
    p = tmp_path / "suite.yaml"
    p.write_text(SUITE.format(define="\n".join("      " + line for line in define.strip().splitlines())))
    return p


def records(path: Path, **kw: object) -> list[Record]:
    s = load_suite(path)
    return list(iter_records(s, builtin_specs(s)))


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


MC = """
data: {data}
fields: {{id: qid, question: q, choices: {choices}, answer: gold}}
task_type: mc
"""


def test_jsonl_csv_parquet_and_saved_dataset_give_the_same_records(tmp_path: Path) -> None:
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    write_jsonl(tmp_path / "d.jsonl", ROWS)
    pq.write_table(pa.Table.from_pylist(ROWS), tmp_path / "d.parquet")
    datasets.Dataset.from_list(ROWS).save_to_disk(str(tmp_path / "d_hf"))
    datasets.DatasetDict({"test": datasets.Dataset.from_list(ROWS)}).save_to_disk(str(tmp_path / "d_dict"))
    flat = [{"qid": r["qid"], "q": r["q"], **{f"o{j}": o for j, o in enumerate(r["opts"])}, "gold": r["gold"]}
            for r in ROWS]  # fmt: skip
    (tmp_path / "d.csv").write_text(
        "qid,q,o0,o1,o2,o3,gold\n" + "".join(",".join(r.values()) + "\n" for r in flat)  # type: ignore[arg-type]
    )

    def messages(data: str, choices: str = "opts", extra: str = "") -> list[tuple[object, ...]]:
        recs = records(suite(tmp_path, MC.format(data=data, choices=choices) + extra))
        return [(r.sample_id, r.label, tuple(r.options or ()), r.messages[-1].content[0].value) for r in recs]

    want = messages("d.jsonl")
    assert len(want) == 6
    assert want[1] == ("q1", "B", ("opt0", "opt1", "opt2", "opt3"),
                       "Which option is number 1?\nA. opt0\nB. opt1\nC. opt2\nD. opt3\n"
                       "Answer with the letter of the correct option only.")  # fmt: skip
    assert messages("d.parquet") == want
    assert messages("d_hf") == want
    assert messages("d_dict", extra="split: test") == want
    assert messages("d.csv", choices="[o0, o1, o2, o3]") == want


def test_mc_answer_as_letter_index_or_text(tmp_path: Path) -> None:
    rows = [{**ROWS[0], "gold": g} for g in ("C", "c. opt2", 2, "2", "opt2", "(C)")]
    write_jsonl(tmp_path / "d.jsonl", rows)
    assert {r.label for r in records(suite(tmp_path, MC.format(data="d.jsonl", choices="opts")))} == {"C"}


def test_fewshot_turns_template_and_generation(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "d.jsonl", ROWS)
    p = suite(tmp_path, MC.format(data="d.jsonl", choices="opts") + """
fewshot: 2
system_prompt: Be brief.
template: "Q: {{ q }} ({{ choices | length }} options) [{{ qid }}]"
target_template: "The answer is {{ answer }}."
generation: {max_tokens: 5}
""")  # fmt: skip
    recs = records(p)
    assert [r.sample_id for r in recs] == ["q2", "q3", "q4", "q5"]  # the two worked examples are not evaluated
    assert [r.index for r in recs] == [0, 1, 2, 3]
    m = recs[0].messages
    assert [x.role for x in m] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert m[1].content[0].value == "Q: Which option is number 0? (4 options) [q0]"
    assert m[2].content[0].value == "The answer is opt0."
    assert m[-1].content[0].value == "Q: Which option is number 2? (4 options) [q2]"
    assert recs[0].generation_options.max_tokens == 5
    # fewshot_data: worked examples from another file; every data row is evaluated
    write_jsonl(tmp_path / "shots.jsonl", ROWS[4:])
    p.write_text(p.read_text().replace("fewshot: 2", "fewshot: 2\n      fewshot_data: shots.jsonl"))
    recs = records(p)
    assert len(recs) == 6 and recs[0].messages[1].content[0].value.endswith("[q4]")


def test_open_answers_keep_every_reference(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "d.jsonl", [{"question": "Capital of France?", "answers": ["Paris", "paris, France"]}])
    p = suite(tmp_path, "data: d.jsonl\nfields: {answer: answers}\ntask_type: open_qa")
    (r,) = records(p)
    assert r.label == ["Paris", "paris, France"]
    spec = builtin_specs(load_suite(p))["mine"]
    assert (spec.postprocessor, [m.name for m in spec.metrics]) == ("first_line", ["exact_match", "anls"])
    assert r.messages[-1].content[0].value == "Capital of France?"


def test_shipped_examples_define_an_image_and_a_text_benchmark() -> None:
    s = load_suite(ROOT / "examples" / "custom_benchmark.yaml")
    specs = builtin_specs(s)
    assert (specs["openbookqa"].modality, specs["easyvqa"].modality) == ("text", "image")
    recs = list(iter_records(s, specs))
    obqa = [r for r in recs if r.benchmark == "openbookqa"]
    vqa = [r for r in recs if r.benchmark == "easyvqa"]
    assert (len(obqa), len(vqa)) == (22, 16)  # 24 CSV rows, 2 of them worked examples
    assert obqa[0].label == "C" and obqa[0].options == ["lions", "humans", "bunnies", "grass"]  # "C. bunnies"
    img = vqa[0].messages[-1].content[0]
    assert isinstance(img, ImageContent) and Path(img.value) == CUSTOM / "easyvqa_images" / "0.png"
    assert vqa[0].modalities() == {"text", "image"}


def test_data_sha256_covers_media_and_rerun_config_round_trips(tmp_path: Path) -> None:
    shutil.copytree(CUSTOM, tmp_path / "custom")
    shutil.copy(ROOT / "examples" / "custom_benchmark.yaml", tmp_path / "suite.yaml")
    s = load_suite(tmp_path / "suite.yaml")
    before = builtin_specs(s)["easyvqa"].data_sha256()
    # a manifest keeps the suite as a dump: it reloads from anywhere (absolute paths) to the same Records
    again = SuiteConfig.model_validate(json.loads(s.model_dump_json()))
    assert list(iter_records(again, builtin_specs(again))) == list(iter_records(s, builtin_specs(s)))
    (tmp_path / "custom" / "easyvqa_images" / "3.png").write_bytes((CUSTOM / "easyvqa_images" / "4.png").read_bytes())
    assert builtin_specs(s)["easyvqa"].data_sha256() != before


@pytest.mark.parametrize(
    ("define", "files", "expected"),
    [
        ("data: d.jsonl\ntask_type: open_qa\nbogus: 1", {}, r"benchmarks\[0\]\.define\.bogus: unknown key"),
        ("data: d.jsonl", {}, "set task_type .* or metrics"),
        ("data: d.jsonl\ntask_type: open_q", {}, "task_type: unknown task type 'open_q'.*open_qa"),
        ("data: d.jsonl\nmetrics: [exact_mach]", {}, r"metrics\[0\]: unknown metric 'exact_mach'.*exact_match"),
        ("data: d.jsonl\ntask_type: open_qa\npostprocessor: numbr", {}, "unknown postprocessor 'numbr'"),
        ("data: nope.jsonl\ntask_type: open_qa", {}, "data file not found: .*nope.jsonl"),
        ("data: d.txt\ntask_type: open_qa", {}, "cannot tell the format of .*d.txt.*set format"),
        ("data: d.jsonl\ntask_type: open_qa\nfields: {question: text}", {}, r"d.jsonl row 1: no column 'text' \(fields.question\); the columns are answer, image, question"),
        ("data: d.jsonl\ntask_type: open_qa\nfields: {image: image}", {}, r"d.jsonl row 2: image file not found: .*missing.png; fix the path"),
        ("data: d.jsonl\ntask_type: open_qa\ntemplate: '{{ questoin }}'", {}, r"d.jsonl row 1: template uses an undefined variable \('questoin' is undefined\)"),
        ("data: d.jsonl\ntask_type: open_qa\ntemplate: '{{ question '", {}, "template line 1: .*fix the Jinja syntax"),
        ("data: d.jsonl\ntask_type: open_qa\nfewshot: 2", {}, "has no rows to evaluate; add rows"),
        ("data: d.jsonl\ntask_type: open_qa\nfewshot: 3\nfewshot_data: d.jsonl", {}, "fewshot: 3 examples asked for, .*d.jsonl has 2"),
        ("data: d.jsonl\ntask_type: mc", {}, "fields.choices: an mc benchmark needs its options"),
        ("data: d.jsonl\ntask_type: open_qa\nmodality: video", {}, "modality is video but the mapped media fields give text"),
        ("data: d.jsonl\ntask_type: open_qa\nsplit: test", {}, "split is only for a saved datasets directory"),
        ("data: bad.jsonl\ntask_type: open_qa", {"bad.jsonl": '{"question": "a", "answer": "b"}\n[1, 2]\n'}, r"bad.jsonl:2: a row must be a JSON object"),
        ("data: bad.jsonl\ntask_type: open_qa", {"bad.jsonl": '{"question": "a", "answer": ""}\n'}, r"bad.jsonl row 1: empty answer in column 'answer'"),
        ("data: mc.jsonl\ntask_type: mc\nfields: {choices: c}", {"mc.jsonl": '{"question": "a", "c": ["x", "y"], "answer": "Z"}\n'}, r"mc.jsonl row 1: answer 'Z' is none of the 2 options, their letters A-B"),
        ("data: mc.jsonl\ntask_type: mc\nfields: {choices: c}", {"mc.jsonl": '{"question": "a", "c": "x, y", "answer": "A"}\n'}, r"choices column 'c' holds a string, not a list"),
    ],
)  # fmt: skip
def test_bad_definitions_are_one_line(tmp_path: Path, define: str, files: dict[str, str], expected: str) -> None:
    (tmp_path / "i.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    write_jsonl(tmp_path / "d.jsonl", [{"question": "a", "answer": "b", "image": "i.png"},
                                       {"question": "c", "answer": "d", "image": "missing.png"}])  # fmt: skip
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(ConfigError) as e:
        load_suite(suite(tmp_path, define))
    msg = str(e.value)
    assert len(msg.splitlines()) == 1, msg
    assert msg.startswith(str(tmp_path / "suite.yaml")), msg
    import re

    assert re.search(expected, msg), msg


def test_definition_file_errors_name_that_file(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "d.jsonl", [{"question": "a", "answer": "b"}])
    (tmp_path / "defs").mkdir()
    (tmp_path / "defs" / "mine.yaml").write_text("data: ../d.jsonl\ntask_type: open_qa\ntemplat: x\n")
    p = tmp_path / "suite.yaml"
    p.write_text(SUITE.format(define="").replace("define:\n", "define: defs/mine.yaml\n"))
    with pytest.raises(ConfigError, match=r"benchmarks\[0\]\.define: .*defs/mine.yaml: templat: unknown key"):
        load_suite(p)
    (tmp_path / "defs" / "mine.yaml").write_text("data: ../d.jsonl\ntask_type: open_qa\n")  # relative to defs/
    assert [r.label for r in records(p)] == ["b"]
    p.write_text(p.read_text().replace("defs/mine.yaml", "defs/other.yaml"))
    with pytest.raises(ConfigError, match="definition file not found: .*defs/other.yaml"):
        load_suite(p)


def test_a_definition_cannot_shadow_a_builtin_or_define_a_framework_task(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "d.jsonl", [{"question": "a", "answer": "b"}])
    p = suite(tmp_path, "data: d.jsonl\ntask_type: open_qa")
    p.write_text(p.read_text().replace("name: mine", "name: mmlu_tiny"))
    with pytest.raises(ConfigError, match="mmlu_tiny is a built-in benchmark; give your definition another name"):
        load_suite(p)
    p.write_text(p.read_text().replace("name: mmlu_tiny", "name: x\n    framework: lmeval"))
    with pytest.raises(ConfigError, match="define is for omnieval's own benchmarks"):
        load_suite(p)


def test_cli_bad_media_is_exit_2_one_line_and_no_run_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_jsonl(tmp_path / "d.jsonl", [{"question": "a", "answer": "b", "image": "gone.png"}])
    p = suite(tmp_path, "data: d.jsonl\ntask_type: open_qa\nfields: {image: image}")
    assert main(["run", str(p), "--output-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "image file not found" in err and "d.jsonl row 1" in err
    assert not (tmp_path / "runs").exists()
