"""int8 variants of the exported MiniLM graph, against the fp32 graph the service runs: throughput and cosine.

Each variant is ``onnxruntime.quantization.quantize_dynamic`` of the cached fp32 graph (fused attention), written
to ``artifacts/bench/variants/``; all run in this process through the service's own ``OnnxMiniLM`` on the same
real texts as bench/embedder.py (best of ``--repeat`` passes):

- ``per-tensor``: every quantizable op (the fused attention becomes QAttention), one scale per weight tensor;
- ``per-channel``: the same, one scale per output channel;
- ``matmul-only``: per-channel, the MatMuls only (the feed-forward layers and the attention's output projection):
  what ``EMBEDDING_PRECISION=int8`` runs.

    python bench/embedder_variants.py --texts 400
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from pathlib import Path

import numpy as np
import onnx
from benchlib import machine_facts, report
from embedder import sample_texts
from onnxruntime.quantization import QuantType, quantize_dynamic

from service.config import Settings
from service.providers.onnx_model import OnnxMiniLM, ensure_model, source_path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results" / "embedder_variants.jsonl"
VARIANTS = {"per-tensor": {"per_channel": False}, "per-channel": {"per_channel": True},
            "matmul-only": {"per_channel": True, "op_types_to_quantize": ["MatMul"]}}


def throughput(model: OnnxMiniLM, texts: list[str], repeat: int) -> tuple[float, np.ndarray]:
    model.embed(["warm up the model", "and its kernels"])
    best, vectors = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        vectors = model.embed(texts)
        best = min(best, time.perf_counter() - started)
    return round(len(texts) / best, 1), vectors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    fp32 = ensure_model(Settings.from_env().model_cache_dir)
    folder = ROOT / "artifacts" / "bench" / "variants"
    folder.mkdir(parents=True, exist_ok=True)
    texts = sample_texts(args.texts)
    result: dict = {"texts": args.texts, "load_average_start": [round(x, 2) for x in os.getloadavg()]}
    rate, reference = throughput(OnnxMiniLM(fp32, source_path()), texts, args.repeat)
    result["fp32"] = {"texts_per_s": rate}
    logging.disable(logging.WARNING)  # quantize_dynamic's advice about static quantization
    for name, options in VARIANTS.items():
        path = folder / f"{name}.onnx"
        quantize_dynamic(str(fp32), str(path), weight_type=QuantType.QInt8,
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT}, **options)
        rate, vectors = throughput(OnnxMiniLM(path, source_path()), texts, args.repeat)
        cosines = np.sum(vectors * reference, axis=1)
        result[name] = {"texts_per_s": rate, "vs_fp32": round(rate / result["fp32"]["texts_per_s"], 2),
                        "mean_cosine": round(float(cosines.mean()), 6), "min_cosine": round(float(cosines.min()), 6),
                        "megabytes": round(path.stat().st_size / 2**20)}
        print(name, result[name], flush=True)
    result.update(machine_facts())
    report(RESULTS, result)


if __name__ == "__main__":
    main()
