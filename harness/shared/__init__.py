"""What both runtimes are built on: the runner base class, the config defaults that
depend on the system and the workload, and connecting to Ray."""
