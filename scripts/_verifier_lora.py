"""LoRA fine-tuning of the SmolLM2 verifier: the torch half of ``scripts/train_verifier.py`` (run in its own venv).

Input: a JSONL of ``{"prompt": <judge prompt>, "label": 0|1, "role": "fit"|"dev"}`` and the base GGUF. Each prompt
is wrapped by the GGUF's own chat template, as llama-server wraps it, and followed by ``Rating: `` (the grammar's
fixed prefix). The base is de-quantized from that very GGUF (transformers' GGUF loader), so the adapter is trained
on the weights llama-server will apply it to. The loss is the two-way cross-entropy of the verdict digit at the
last position: the grammar lets the judge write only ``0`` or ``1`` there, and the verdict probability is
``p1 / (p0 + p1)`` over the same two logits. No omnieval import: this venv has torch, transformers, peft, gguf.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--epochs", type=float, default=2.0)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--max-len", type=int, default=384)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(args.seed)
    random.seed(args.seed)
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    gguf = Path(args.gguf)
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.bfloat16)
    if hasattr(model.config, "quantization_config"):
        delattr(model.config, "quantization_config")
    model.config.architectures = [type(model).__name__]  # the GGUF loader leaves it unset; the converter needs it
    model.config.save_pretrained(str(out / "base"))  # convert_lora_to_gguf reads the base's hyper-parameters
    tok.save_pretrained(str(out / "base"))
    digit = [tok.convert_tokens_to_ids(d) for d in ("0", "1")]

    rows = [json.loads(line) for line in Path(args.data).read_text(encoding="utf-8").splitlines() if line.strip()]
    items = []
    for r in rows:
        text = (
            tok.apply_chat_template(
                [{"role": "user", "content": r["prompt"]}], add_generation_prompt=True, tokenize=False
            )
            + "Rating: "
        )
        ids = tok(text, add_special_tokens=False)["input_ids"]
        if len(ids) > args.max_len:  # the prompt was clipped by characters already; cut the question's head
            ids = ids[:32] + ids[-(args.max_len - 32) :]
        items.append({"ids": ids, "label": int(r["label"]), "role": r["role"]})
    fit = [it for it in items if it["role"] == "fit"]
    dev = [it for it in items if it["role"] == "dev"]
    print(
        f"fit {len(fit)} dev {len(dev)}; tokens/item mean {sum(len(i['ids']) for i in fit) / max(1, len(fit)):.0f}",
        flush=True,
    )

    model = get_peft_model(
        model,
        LoraConfig(
            r=args.rank,
            lora_alpha=2 * args.rank,
            lora_dropout=0.05,
            task_type="CAUSAL_LM",
            target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        ),
    )
    head = model.get_output_embeddings().weight  # tied to the embeddings: frozen

    def batches(data: list[dict], shuffle: bool) -> list[list[dict]]:
        data = sorted(data, key=lambda it: len(it["ids"]))  # length buckets: little padding
        bs = [data[i : i + args.batch] for i in range(0, len(data), args.batch)]
        if shuffle:
            random.shuffle(bs)
        return bs

    def logits2(batch: list[dict]) -> torch.Tensor:
        n = max(len(it["ids"]) for it in batch)
        pad = tok.pad_token_id if tok.pad_token_id is not None else 0
        ids = torch.tensor([[pad] * (n - len(it["ids"])) + it["ids"] for it in batch])  # left padding
        mask = torch.tensor([[0] * (n - len(it["ids"])) + [1] * len(it["ids"]) for it in batch])
        hidden = model.base_model.model.model(input_ids=ids, attention_mask=mask).last_hidden_state[:, -1]
        return hidden.float() @ head[digit].float().T  # (batch, 2): the verdict digits' logits

    def evaluate(data: list[dict]) -> dict:
        model.eval()
        probs = []
        with torch.no_grad():
            for b in batches(data, False):
                p = torch.softmax(logits2(b), -1)[:, 1].tolist()
                probs += list(zip(p, [it["label"] for it in b], strict=True))
        model.train()
        tp = sum(1 for p, y in probs if p >= 0.5 and y == 1)
        tn = sum(1 for p, y in probs if p < 0.5 and y == 0)
        pos = sum(y for _, y in probs) or 1
        neg = (len(probs) - sum(y for _, y in probs)) or 1
        return {"n": len(probs), "balanced_accuracy": round(50 * (tp / pos + tn / neg), 1)}

    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    plan = batches(fit, True)
    total = max(1, int(math.ceil(len(plan) * args.epochs)))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(1, total // 10)) * max(0.0, (total - s) / total)
    )
    model.train()
    t0, step, ema = time.monotonic(), 0, None
    while step < total:
        for b in batches(fit, True) if step else plan:
            if step >= total:
                break
            y = torch.tensor([it["label"] for it in b])
            loss = torch.nn.functional.cross_entropy(logits2(b), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
            step += 1
            ema = loss.item() if ema is None else 0.9 * ema + 0.1 * loss.item()
            if step % 10 == 0 or step == total:
                print(f"step {step}/{total} loss {ema:.3f} {time.monotonic() - t0:.0f}s", flush=True)
    report = {
        "steps": total,
        "seconds": round(time.monotonic() - t0, 1),
        "fit": len(fit),
        "dev_torch": evaluate(dev) if dev else None,
    }
    print(json.dumps(report), flush=True)
    model.save_pretrained(str(out / "adapter"))
    (out / "train_report.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
