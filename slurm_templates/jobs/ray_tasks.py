"""Connect to the Ray cluster that ray.sbatch started on the job's nodes, and run tasks on it.

    python slurm_templates/jobs/ray_tasks.py HEAD_ADDRESS
"""

import socket
import sys

import ray


@ray.remote
def where_and_square(x):
    import socket

    return socket.gethostname(), x * x


def main() -> None:
    ray.init(address=sys.argv[1], log_to_driver=False)
    results = ray.get([where_and_square.remote(x) for x in range(20)])
    assert [r[1] for r in results] == [x * x for x in range(20)]
    nodes = [n for n in ray.nodes() if n["Alive"]]
    print(f"ray done: {len(nodes)} node(s), {int(ray.cluster_resources().get('CPU', 0))} CPUs, "
          f"tasks ran on {sorted({h for h, _ in results})}, driver on {socket.gethostname()}")
    ray.shutdown()


if __name__ == "__main__":
    main()
