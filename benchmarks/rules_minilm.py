"""Fine-tune all-MiniLM-L6-v2's biases and layer norms for the rule classifier (English).

    pip install torch transformers onnx scikit-learn   # training only; memos needs none of them
    python -m benchmarks.rules_minilm --model-dir ../shared/models/all-MiniLM-L6-v2/onnx

Reads the ONNX model's weights into a PyTorch ``BertModel``, and trains, on the English *train*
split of ``tests/data/rules/corpus.tsv``, only the parameters the ONNX file names (every bias
and layer norm: 30,720 numbers; "BitFit", Ben Zaken et al. 2022) and a linear head on the
mean-pooled output, 6 epochs, on four fifths of that split (a sentence's fifth is set by its
id: sentences added later leave the others where they were), once from each of
``INIT_SEEDS`` (the head's initialisation and the batch order). Sentences are read as
:func:`memos.text.classifiers.rules.bare` gives them, as the classifier reads them.
The threshold on the mean of the two models' log-odds (the n-gram model fitted on the same
four fifths) is the highest that keeps recall at ``CV_RECALL`` (0.95, the recall a rule
detector must reach) plus one standard error of that estimate on the fifth left out, which
neither model was fitted on; the fit with the best precision there is the one written. Writes
``memos/text/rules_minilm.npz``; ``python -m benchmarks.rules evaluate`` then measures it. The
revocation head reads this model's vectors: refit it next (``python -m benchmarks.revocations_minilm``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memos.text.classifiers.rules import bare, features
from memos.text.classifiers.rules_minilm import MINILM_FILE

from .rules import fit_on_model_dir, id_folds, load_corpus

MIX = 0.5  # the two models' log-odds count equally
EPOCHS, BATCH, LR = 6, 16, 2e-3
# Fine-tuning from one initialisation of the head and one batch order is a roll of the dice:
# refitted after 263 sentences were added, "Rental cars must be automatic." went from 0.91 to
# 0.26. Each of these seeds is fitted on the same four fifths, and the one with the best
# precision at the threshold's recall on the held-back fifth is shipped.
INIT_SEEDS = (0, 1, 2)
# the recall target of the detector; a threshold kept for 0.97 cost 0.039 of cross-validated
# precision (0.843 against 0.882) for 0.020 of recall
CV_RECALL = 0.95


def _bert(model_dir: Path) -> tuple[Any, set[str]]:
    import onnx
    import torch
    from onnx import numpy_helper
    from transformers import BertConfig, BertModel

    graph = onnx.load(str(model_dir / "model.onnx"))
    inits = {i.name: numpy_helper.to_array(i) for i in graph.graph.initializer}
    state = {k[2:]: torch.tensor(v) for k, v in inits.items() if k.startswith("m.")}
    for node in graph.graph.node:  # the unnamed matrices, by the name of the MatMul that uses them
        if node.op_type == "MatMul" and node.input[1] in inits and not node.input[1].startswith("m."):
            state[".".join(node.name.strip("/").split("/")[1:-1]) + ".weight"] = torch.tensor(inits[node.input[1]].T.copy())
    bert = BertModel(BertConfig.from_json_file(str(model_dir / "config.json")), add_pooling_layer=False)
    bert.load_state_dict(state, strict=True)
    # the file names every bias and layer norm (and the embedding tables, which stay as they are)
    named = {k[2:] for k in inits if k.startswith("m.") and not k.endswith("_embeddings.weight")}
    return bert, named


def train(model_dir: Path, out: Path = MINILM_FILE) -> dict[str, Any]:
    """Fit and write the weights (see the module docs); returns the cross-validated numbers."""
    import torch
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LogisticRegression
    from tokenizers import Tokenizer

    torch.set_num_threads(2)
    rows = [r for r in load_corpus() if r["lang"] == "en" and r["split"] == "train"]
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.enable_truncation(max_length=256)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")

    def fit(part: list[dict[str, str]], seed: int) -> tuple[Any, Any, Any, set[str]]:
        torch.manual_seed(seed)
        bert, named = _bert(model_dir)
        for name, p in bert.named_parameters():
            p.requires_grad = name in named
        head = torch.nn.Linear(bert.config.hidden_size, 1)

        def pooled(texts: Sequence[str]) -> Any:
            enc = tok.encode_batch([bare(t) for t in texts])  # as the classifier reads them
            ids = torch.tensor([e.ids for e in enc])
            mask = torch.tensor([e.attention_mask for e in enc])
            hidden = bert(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids)).last_hidden_state
            m = mask.unsqueeze(-1).float()
            return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)

        y = torch.tensor([r["label"] != "none" for r in part], dtype=torch.float32)
        weight = (1 - y.mean()) / y.mean()
        opt = torch.optim.AdamW([p for p in bert.parameters() if p.requires_grad] + list(head.parameters()), lr=LR,
                                weight_decay=0.0)
        shuffle = np.random.default_rng(seed)
        for epoch in range(EPOCHS):
            bert.train()
            total = 0.0
            perm = shuffle.permutation(len(part))
            for start in range(0, len(part), BATCH):
                idx = perm[start : start + BATCH]
                logits = head(pooled([part[i]["text"] for i in idx])).squeeze(-1)
                loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y[idx], pos_weight=weight)
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += float(loss.detach())
            print(f"  epoch {epoch + 1}/{EPOCHS}: loss {total:.2f}")
        bert.eval()
        return bert, head, pooled, named

    # The threshold is chosen on sentences the shipped models were not fitted on: a fifth of the
    # split is held back for it. (It used to be chosen on five fold models' out-of-fold scores
    # and applied to a model then fitted on the whole split, which those scores do not describe.)
    fit_idx, held_idx = id_folds([r["id"] for r in rows])[0]
    part, held = [rows[i] for i in fit_idx], [rows[i] for i in held_idx]
    print(f"the shipped model, on {len(part)} of the {len(rows)} English train sentences")
    vec = DictVectorizer()
    ngram = LogisticRegression(C=8.0, max_iter=5000, class_weight="balanced")
    ngram.fit(vec.fit_transform([features(bare(r["text"])) for r in part]), [r["label"] != "none" for r in part])
    p = np.clip(ngram.predict_proba(vec.transform([features(bare(r["text"])) for r in held]))[:, 1], 1e-6, 1 - 1e-6)
    gold = np.array([r["label"] != "none" for r in held])
    # A threshold that keeps exactly CV_RECALL on the fifth's ~200 rules falls short of it on
    # unseen sentences about half the time (one fit kept 0.95 there and reached 0.929 on the
    # test split): it keeps CV_RECALL plus one standard error of the estimate instead.
    wanted = CV_RECALL + math.sqrt(CV_RECALL * (1 - CV_RECALL) / int(gold.sum()))
    best: tuple[dict[str, Any], float, Any, Any, set[str]] | None = None
    for seed in INIT_SEEDS:
        bert, head, pooled, named = fit(part, seed)
        with torch.no_grad():
            neural = head(pooled([r["text"] for r in held])).squeeze(-1).numpy()
        mixed = MIX * neural + (1 - MIX) * np.log(p / (1 - p))
        candidates = [t for t in np.arange(0.02, 0.98, 0.01)
                      if (mixed[gold] >= math.log(t / (1 - t))).mean() >= wanted]
        threshold = float(round(max(candidates), 2))
        chosen = mixed >= math.log(threshold / (1 - threshold))
        held_back = {"n": len(held), "seed": seed, "recall": round(float(chosen[gold].mean()), 3),
                     "precision": round(float(gold[chosen].mean()), 3)}
        print(f"  seed {seed}: threshold {threshold}, on the held-back fifth {held_back}")
        if best is None or held_back["precision"] > best[0]["precision"]:
            best = (held_back, threshold, bert, head, named)
    assert best is not None
    held_back, threshold, bert, head, named = best
    arrays = {"m." + n: p.detach().numpy().astype(np.float32) for n, p in bert.named_parameters() if n in named}
    np.savez_compressed(out, mix=np.float32(MIX), threshold=np.float32(threshold),
                        head_w=head.weight.detach().numpy()[0].astype(np.float32),
                        head_b=np.float32(head.bias.detach().numpy()[0]), **arrays)
    print(f"wrote {out}: {sum(a.size for a in arrays.values())} model numbers, threshold {threshold}, "
          f"on the held-back fifth {held_back}")
    return held_back


def main(argv: Sequence[str] | None = None) -> int:
    return fit_on_model_dir("python -m benchmarks.rules_minilm", (__doc__ or "").split("\n\n")[0], MINILM_FILE, train, argv)


if __name__ == "__main__":
    raise SystemExit(main())
