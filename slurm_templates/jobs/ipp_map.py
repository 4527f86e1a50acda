"""Connect to the ipyparallel engines that ipyparallel.sbatch started with srun, and map work over them.

    python slurm_templates/jobs/ipp_map.py PROFILE_DIR N_ENGINES
"""

import socket
import sys

import ipyparallel as ipp


def where_and_square(x):
    import os
    import socket

    return socket.gethostname(), os.getpid(), x * x


def main() -> None:
    profile_dir, n_engines = sys.argv[1], int(sys.argv[2])
    client = ipp.Client(profile_dir=profile_dir, timeout=60)
    client.wait_for_engines(n_engines, timeout=120)
    view = client.load_balanced_view()
    results = view.map_sync(where_and_square, range(4 * n_engines))
    pids = {pid for _, pid, _ in results}
    assert [r[2] for r in results] == [x * x for x in range(4 * n_engines)]
    print(f"ipyparallel done: {len(client.ids)} engines, {len(pids)} of them did work, "
          f"on {sorted({host for host, _, _ in results})}, driver on {socket.gethostname()}")
    client.shutdown(hub=True)  # stops the engines and the controller


if __name__ == "__main__":
    main()
