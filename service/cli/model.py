"""``supportrag model export``: the local model's ONNX graph, exported ahead of the first use."""

from __future__ import annotations

import click

from service.config import Settings


@click.group()
def model() -> None:
    """The local embedding model (all-MiniLM-L6-v2 on ONNX Runtime)."""


@model.command("export")
@click.option("--force", is_flag=True, help="Export again even if a verified graph is cached.")
def model_export(force: bool) -> None:
    """Export the packaged weights to ONNX under the model cache (SUPPORTRAG_MODEL_DIR, else <data dir>/models).

    Needs torch and transformers (install-time dependencies); later runs need only ONNX Runtime.
    """
    # Here, not at the top: onnxruntime costs every other command ~0.2 s to import.
    from service.providers.onnx_model import export_lock, export_model, model_folder, verified_model

    cache = Settings.from_env().model_cache_dir
    with export_lock(cache):  # a serve starting meanwhile waits for this export rather than making its own
        cached = None if force else verified_model(cache, "int8") and verified_model(cache)
        if cached is not None:
            click.echo(f"already exported and verified: {cached}")
            return
        click.echo(f"exporting to {model_folder(cache)} …", err=True)
        exported = export_model(cache)
    click.echo(f"exported {exported.path} (sha256 {exported.sha256[:16]}…) in {exported.seconds:.1f} s")
