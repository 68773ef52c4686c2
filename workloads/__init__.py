"""Workload profiles (data files), dataset loaders and verifiers."""
