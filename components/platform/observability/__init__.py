"""Observability: kube-prometheus-stack, GPU and training alerts, dashboards, central logs."""
