"""Hub-ready draft folders (model card + config + weights), shipped as package data."""
