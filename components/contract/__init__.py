"""The contracts between the platform, job and fleet projects (docs/architecture.md "Contracts
between projects"): a pydantic model per stack output another project reads (`schema.py`,
`job_platform.py`, `fleet_worker.py`, `fleet_platform.py`), their writers and the job stacks'
reading and judging (`platform_contract.py`, `fleet_contract.py`)."""
