"""Simulator of LLM RL training systems: presets, performance models and the event loop."""
