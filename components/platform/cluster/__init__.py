"""The cluster and its network: VPC, EKS (pulumi-eks), node groups, IAM builders, the handles other
components receive."""
