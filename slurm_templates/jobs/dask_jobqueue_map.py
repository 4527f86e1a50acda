"""A Dask cluster whose workers are Slurm jobs of their own, submitted by dask-jobqueue.

dask-slurm.sbatch runs this in a small job: the scheduler runs here, and each worker is a separate Slurm
job (written and submitted with sbatch by dask-jobqueue, cancelled at the end). Partition and account
come from SBATCH_PARTITION / SBATCH_ACCOUNT, which sbatch reads from the environment (site.sh sets them).

    python slurm_templates/jobs/dask_jobqueue_map.py N_WORKER_JOBS SCRATCH_FOLDER [HOST_IP]
"""

import sys

from dask_jobqueue import SLURMCluster
from distributed import Client


def main() -> None:
    n_jobs, scratch = int(sys.argv[1]), sys.argv[2]
    host = sys.argv[3] if len(sys.argv) > 3 else ""
    cluster = SLURMCluster(
        cores=1, processes=1, memory="2GB", walltime="00:10:00", job_name="dask-worker",
        local_directory=scratch, log_directory=scratch,
        # Bind the scheduler and the workers to the address the other nodes reach (default: the
        # scheduler's own choice); no dashboard in a batch job.
        scheduler_options={"dashboard_address": None, **({"host": host} if host else {})},
        worker_extra_args=["--host", host] if host else [],
    )
    print(cluster.job_script())
    cluster.scale(jobs=n_jobs)
    with Client(cluster) as client:
        client.wait_for_workers(n_jobs, timeout=180)
        slurm_jobs = sorted(job.job_id for job in cluster.workers.values())
        total = client.submit(sum, client.map(lambda x: x * x, range(100))).result()
        assert total == sum(x * x for x in range(100))
        print(f"dask-jobqueue done: {len(client.scheduler_info()['workers'])} workers in Slurm jobs "
              f"{' '.join(slurm_jobs)}, sum of squares {total}")
    cluster.close()


if __name__ == "__main__":
    main()
