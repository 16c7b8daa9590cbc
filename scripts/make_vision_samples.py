"""Render the tiny image tasks for the lmms-eval and VLMEvalKit adapters: one coloured shape per 64x64 PNG.

    .venv/bin/python scripts/make_vision_samples.py

Writes ``omnieval/benchmarks/data/lmms/tiny_shapes/{images/*.png,test.jsonl}`` (lmms-eval local task beside its YAML)
and ``omnieval/benchmarks/data/vlmeval/TinyShapesMCQ.tsv`` (VLMEvalKit's TSV layout: base64 ``image`` column, options
A-D, letter ``answer``). The images are drawn here with PIL (our own, Apache-2.0), so no third-party licence applies;
the answer is a property of the pixels (the shape's colour and kind), which a fake VLM in the tests can read back to
prove the image bytes reached the engine intact. Deterministic: reruns give the same bytes.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import sys
from pathlib import Path

from PIL import Image, ImageDraw

ROOT = Path(__file__).resolve().parents[1] / "omnieval" / "benchmarks" / "data"
COLORS = {"red": (220, 30, 30), "green": (30, 170, 60), "blue": (30, 60, 220), "yellow": (230, 200, 20)}
SHAPES = ("circle", "square", "triangle")
# (shape, colour) per sample: every colour and shape appears, order fixed
SAMPLES = [("circle", "red"), ("square", "green"), ("triangle", "blue"), ("circle", "yellow"),
           ("square", "blue"), ("triangle", "red"), ("circle", "green"), ("square", "yellow")]  # fmt: skip


def render(shape: str, color: str) -> bytes:
    img = Image.new("RGB", (64, 64), (255, 255, 255))
    d = ImageDraw.Draw(img)
    rgb = COLORS[color]
    if shape == "circle":
        d.ellipse((12, 12, 52, 52), fill=rgb)
    elif shape == "square":
        d.rectangle((14, 14, 50, 50), fill=rgb)
    else:
        d.polygon([(32, 10), (54, 52), (10, 52)], fill=rgb)
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=False)
    return buf.getvalue()


def main() -> int:
    lmms = ROOT / "lmms" / "tiny_shapes"
    (lmms / "images").mkdir(parents=True, exist_ok=True)
    rows = []
    for i, (shape, color) in enumerate(SAMPLES):
        png = render(shape, color)
        (lmms / "images" / f"shape_{i}.png").write_bytes(png)
        rows.append({"id": f"shape_{i}", "image": f"images/shape_{i}.png", "shape": shape,
                     "question": "What colour is the shape in the image? Answer with one word.", "answer": color})  # fmt: skip
    (lmms / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    vk = ROOT / "vlmeval"
    vk.mkdir(parents=True, exist_ok=True)
    letters = "ABCD"
    with open(vk / "TinyShapesMCQ.tsv", "w", newline="") as f:
        w = csv.writer(f, delimiter="\t", lineterminator="\n")
        w.writerow(["index", "image", "question", "A", "B", "C", "D", "answer", "category"])
        for i, (shape, color) in enumerate(SAMPLES):
            options = list(COLORS)  # fixed order; the answer letter moves with the colour
            w.writerow([i, base64.b64encode(render(shape, color)).decode(), "What colour is the shape?",
                        *options, letters[options.index(color)], shape])  # fmt: skip
    print(f"wrote {len(rows)} samples to {lmms} and {vk / 'TinyShapesMCQ.tsv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
