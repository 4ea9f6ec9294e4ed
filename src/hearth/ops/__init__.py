"""Running a deployment: the job queue, backups, cleanup, moving between stores (SPEC 1, 14, 15)."""
