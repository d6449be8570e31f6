"""Scheduling: Kueue, Volcano, Kubeflow Trainer, priorities and flavors."""
