"""`rolloutbench validate`: the same runs live and on the simulator, compared."""
