"""Images: the platform's ECR registry and signing key, the reference trainer the deploy builds and
signs, and the admission policies that trust exactly that signer."""
