"""Interaction logs with a known sequential structure."""

import numpy as np


def write_cluster_walks(path, num_users=300, num_clusters=10, cluster_size=20, seed=0):
    """A CSV log where every user walks through item clusters in a fixed order.

    Items are numbered cluster by cluster. A user starts at a random item,
    steps to the next item of its cluster a random number of times (3 to 8),
    then jumps to the first item of the next cluster (a Markov chain over
    clusters), so the next item is the successor of the last one, which no
    popularity count knows. No user sees an item twice. Returns the path.
    """
    rng = np.random.default_rng(seed)
    lines = ["user,item,timestamp"]
    for user in range(num_users):
        cluster = int(rng.integers(num_clusters))
        offset = int(rng.integers(cluster_size - 8))
        time = 0
        for _ in range(int(rng.integers(2, 4))):
            for step in range(int(rng.integers(3, 9))):
                item = cluster * cluster_size + offset + step
                lines.append(f"user{user},item{item},{time}")
                time += 1
            cluster, offset = (cluster + 1) % num_clusters, 0
    path.write_text("\n".join(lines) + "\n")
    return path
