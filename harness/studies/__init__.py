"""Studies: many runs for a purpose (reproduce the papers, what-if, calibrate, validate
the simulator against live runs, sweep, regress, plan, the live demo, the benchmark)."""
