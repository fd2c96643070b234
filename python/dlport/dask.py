"""``import dlport.dask``: ``dlport.Tensor`` in Dask distributed's own serialization family (and
in ``dask.sizeof``), in this process.

Import it where tensors travel through Dask: in the client, and in every worker, through Dask's
preload (``dask worker --preload dlport.dask``, or ``distributed.worker.preload: [dlport.dask]``
in Dask's configuration, which a ``LocalCluster`` passes to the workers it starts). A process
that has not imported it sends tensors by pickle (which works, with a copy in band where Dask
pickles with protocol 4, as its scheduler does), and cannot read the family's form: a worker
without it fails to deserialize a tensor a registered client sends ("No dispatch for
<class 'dlport.Tensor'>"). ``import dlport`` never imports Dask and installs no import hook;
this module imports ``distributed`` (an ``ImportError`` where it is not installed).
"""

from __future__ import annotations

from dask.sizeof import sizeof
from distributed.protocol.serialize import dask_deserialize, dask_serialize

from ._dask import _deserialize, _serialize, register_sizeof
from ._native import Tensor

dask_serialize.register(Tensor)(_serialize)
dask_deserialize.register(Tensor)(_deserialize)
# Also the dask.sizeof entry point's work: here for an installation without the package's
# metadata (a source tree on sys.path).
register_sizeof(sizeof)
