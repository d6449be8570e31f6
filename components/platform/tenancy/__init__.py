"""Team tenancy: namespace, quota, identity, RBAC, network policies, queues, secrets and the team's
deploy identity."""
