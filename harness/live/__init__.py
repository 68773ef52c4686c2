"""Live components: a real (tiny, locally built) model and engines, for end-to-end checks on CPU."""
