"""Embedding and chat models: small Protocols with the real providers behind them. Imports config only."""
