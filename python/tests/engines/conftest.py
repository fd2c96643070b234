"""The engines tests (scripts/engines-test.sh): Ray and Dask in the peers' venv
(python/requirements-peers.txt). One Ray cluster of two nodes on this machine serves every Ray
test: a head node and a second raylet on the loopback (ray.cluster_utils.Cluster), each with a
resource of its own (`head`, `node2`), so a test places a task on either."""

import pytest


@pytest.fixture(scope="session")
def ray_cluster():
    ray = pytest.importorskip("ray", reason="Ray is not installed: run scripts/engines-test.sh")
    from ray.cluster_utils import Cluster

    store = 512 * 2**20
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "resources": {"head": 1}, "object_store_memory": store,
                        "include_dashboard": False},
    )
    cluster.add_node(num_cpus=1, resources={"node2": 1}, object_store_memory=store)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
    assert len([n for n in ray.nodes() if n["Alive"]]) == 2
    yield ray
    ray.shutdown()
    cluster.shutdown()
