"""Real engines: a synthesized stack applied to a real kube-apiserver, scheduler,
controller-manager and Kueue, run as local processes (envtest's way). docs/real-engines.md."""
