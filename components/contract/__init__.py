"""The contract between the platform stack and the team job stacks (`jobs/`): what the platform
exports as `jobPlatform` and how a job stack rebuilds the platform's config from it."""
