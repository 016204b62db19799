"""The ONNX embedder against the torch reference on real text, its cached graph's checksum, and a CLI search that
never loads torch."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from service.config import Settings
from service.providers.embeddings import LocalEmbedder
from service.providers.onnx_model import DATA_FILE, INT8_FILE, MANIFEST_FILE, MODEL_FILE, model_folder, verified_model
from service.providers.torch_reference import TorchReferenceEmbedder

from .conftest import shared_eval_set
from .helpers import run_cli



def real_sample() -> list[str]:
    """A fixed sample of the shared eval sets: FAQ entries, long abstracts (past the window) and user queries."""
    texts = []
    for name, documents, queries in (("stackfaq_dev", 4, 4), ("scifact_dev", 3, 2), ("covidfaq_dev", 4, 4)):
        folder = shared_eval_set(name)
        lines = (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:documents]
        texts += [f"{d['title']}\n\n{d['text']}" for d in map(json.loads, lines)]
        lines = (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines()[:queries]
        texts += [json.loads(line)["text"] for line in lines]
    return texts


@pytest.fixture(scope="module")
def reference() -> TorchReferenceEmbedder:
    return TorchReferenceEmbedder()


def test_onnx_vectors_agree_with_the_torch_reference_on_real_text(real_local_embedder, reference):
    texts = real_sample()
    onnx, torch = real_local_embedder.embed(texts), reference.embed(texts)
    cosines = np.sum(onnx * torch, axis=1)
    assert onnx.shape == torch.shape == (len(texts), 384)
    assert cosines.mean() >= 0.99 and cosines.min() >= 0.98
    assert np.allclose(np.linalg.norm(onnx, axis=1), 1.0, atol=1e-5)


def test_the_int8_graph_stays_within_the_quality_bar_on_real_text(real_local_embedder, reference):
    texts = real_sample()
    int8 = LocalEmbedder(cache_dir=real_local_embedder.cache_dir, threads=0, precision="int8")
    quantized, torch = int8.embed(texts), reference.embed(texts)
    cosines = np.sum(quantized * torch, axis=1)
    assert cosines.mean() >= 0.99 and cosines.min() >= 0.98
    assert cosines.mean() < 0.99999  # it is the quantized graph, not the fp32 one again


def test_the_exported_graph_runs_one_fused_attention_kernel_per_layer(real_local_embedder):
    import onnx

    folder = model_folder(real_local_embedder.cache_dir)
    graph = onnx.load(str(folder / MODEL_FILE), load_external_data=False).graph
    kinds = [node.op_type for node in graph.node]
    assert kinds.count("Attention") == 6 and "Softmax" not in kinds  # MiniLM-L6: six layers, none unfused
    quantized = [node.op_type for node in onnx.load(str(folder / INT8_FILE)).graph.node]
    assert quantized.count("Attention") == 6 and "QAttention" not in quantized  # attention stays fp32
    assert quantized.count("MatMulInteger") >= 12  # the feed-forward layers are int8


def test_onnx_counts_and_windows_word_pieces_as_the_reference_does(real_local_embedder, reference):
    texts = real_sample()
    assert real_local_embedder.count_tokens(texts) == reference.count_tokens(texts)
    assert real_local_embedder.input_window_tokens == reference.input_window_tokens == 254
    long_text = " ".join(texts)  # far past the window: only its first 256 pieces count, as in sentence-transformers
    assert float(real_local_embedder.embed([long_text])[0] @ reference.embed([long_text])[0]) >= 0.99


def test_a_cached_graph_whose_bytes_changed_is_refused(tmp_path):
    cache = Settings.from_env().model_cache_dir
    assert verified_model(cache) is not None  # the session's embedder exported or verified it
    copy = model_folder(tmp_path)
    copy.mkdir(parents=True)
    for name in (MODEL_FILE, DATA_FILE, MANIFEST_FILE):
        shutil.copyfile(model_folder(cache) / name, copy / name)
    assert verified_model(tmp_path) == copy / MODEL_FILE
    with (copy / MODEL_FILE).open("r+b") as graph:
        graph.seek(-100, os.SEEK_END)
        byte = graph.read(1)
        graph.seek(-100, os.SEEK_END)
        graph.write(bytes([byte[0] ^ 0xFF]))
    assert verified_model(tmp_path) is None


def test_a_cache_of_the_older_unfused_format_is_not_used(tmp_path):
    cache = Settings.from_env().model_cache_dir
    copy = model_folder(tmp_path)
    copy.mkdir(parents=True)
    for name in (MODEL_FILE, DATA_FILE, INT8_FILE):
        shutil.copyfile(model_folder(cache) / name, copy / name)
    manifest = json.loads((model_folder(cache) / MANIFEST_FILE).read_text())
    (copy / MANIFEST_FILE).write_text(json.dumps(manifest))
    assert verified_model(tmp_path) == copy / MODEL_FILE and verified_model(tmp_path, "int8") == copy / INT8_FILE
    del manifest["format"]  # what an export before the fused graph wrote
    (copy / MANIFEST_FILE).write_text(json.dumps(manifest))
    assert verified_model(tmp_path) is None and verified_model(tmp_path, "int8") is None


SEARCH_SCRIPT = """
import sys
from service.cli.main import main
try:
    main(["search", "I forgot my password", "--limit", "1"], standalone_mode=False)
finally:
    print("LOADED", *sorted(m for m in ("torch", "transformers", "sentence_transformers") if m in sys.modules))
"""


def test_a_cli_search_embeds_without_loading_torch(pg_url, engine):
    env = {**os.environ, "DATABASE_URL": pg_url, "SUPPORTRAG_AUTO_SEED": "0"}
    done = subprocess.run([sys.executable, "-c", SEARCH_SCRIPT], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "LOADED"


def test_model_export_reports_a_verified_cached_graph_without_exporting_again():
    before = (model_folder(Settings.from_env().model_cache_dir) / MODEL_FILE).stat().st_mtime_ns
    result = run_cli("model", "export")
    assert result.output.startswith("already exported and verified: ")
    assert (model_folder(Settings.from_env().model_cache_dir) / MODEL_FILE).stat().st_mtime_ns == before
