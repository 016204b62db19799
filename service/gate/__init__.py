"""The calibrated answer gate: evidence features, the calibrator, threshold choice, team reviews; imports retrieval and db, never web."""
