"""The Record schema: one shape for every modality, lossless JSON round trip, strict content typing."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from omnieval import AudioContent, ImageContent, Message, Output, Record, TextContent, TextOutput, VideoContent
from omnieval.core import _schema as schemamod


def video_record() -> Record:
    return Record(
        benchmark="mvbench_test_64frames",
        index=0,
        messages=[
            Message(
                role="user",
                content=[
                    VideoContent(value="/d/action_sequence__0.mp4", num_frames=64, sampling_strategy="uniform"),
                    TextContent(value="What happened after ...?"),
                ],
            )
        ],
        label=["A"],
        output=Output(text=TextOutput(prediction=["A. Ate the medicine."], prediction_postprocessed=["A"])),
        metrics={"exact_match": 1.0},
    )


def test_paper_example_round_trips() -> None:
    r = video_record()
    again = Record.model_validate_json(r.model_dump_json())
    assert again == r
    assert again.messages[0].content[0].num_frames == 64  # type: ignore[union-attr]
    assert again.prediction == "A. Ate the medicine." and again.prediction_postprocessed == "A"
    assert again.modalities() == {"video", "text"}


def test_content_is_discriminated_by_type() -> None:
    m = Message.model_validate({"role": "user", "content": [{"type": "audio", "value": "a.wav", "sampling_rate": 16000}]})
    assert isinstance(m.content[0], AudioContent) and m.content[0].sampling_rate == 16000
    m = Message.model_validate({"role": "user", "content": [{"type": "image", "value": "x.png"}]})
    assert isinstance(m.content[0], ImageContent)
    with pytest.raises(ValidationError):
        Message.model_validate({"role": "user", "content": [{"type": "smell", "value": "x"}]})
    with pytest.raises(ValidationError):  # video fields are not valid on text
        Message.model_validate({"role": "user", "content": [{"type": "text", "value": "x", "num_frames": 3}]})


def test_invalid_values_rejected() -> None:
    with pytest.raises(ValidationError):
        VideoContent(value="v.mp4", num_frames=0)
    with pytest.raises(ValidationError):
        Record(benchmark="b", index=-1, messages=[])


def test_every_schema_field_documented() -> None:
    from pydantic import BaseModel

    for v in vars(schemamod).values():
        if isinstance(v, type) and issubclass(v, BaseModel) and v.__module__ == schemamod.__name__ and not v.__name__.startswith("_"):
            for name, f in v.model_fields.items():
                if name in ("type",):
                    continue
                assert f.description, f"{v.__name__}.{name}"
